#!/usr/bin/env python3
"""Per-call host cost of fastattn against SDPA in the host-bound regime, and a CUDA-graph decode.

    python bench/call_overhead.py [--calls 2000] [--out results.md] [--device cpu]

Rows (bf16, b 1, s 128, h 16/4, d 128, causal; the kernels take a few microseconds, so a loop of
calls without a sync measures what the host spends per call):
  sdpa            torch.nn.functional.scaled_dot_product_attention (enable_gqa)
  fastattn        fastattn.flash_attn_func under torch.no_grad (the direct path: plain-value views)
  fastattn op     torch.ops.fastattn.fwd (the custom op: what torch.compile runs)
  fastattn grad   flash_attn_func with q.requires_grad (eager autograd without the op: DirectAttention)
  op grad         torch.ops.fastattn.fwd with q.requires_grad (the op's autograd wrapper)
  _C.forward_views  the extension alone on ready views (validation, launch): the C++ call's cost
  _C.forward      the extension alone over DLPack (numpy/CuPy's path, and fastattn.forward's)
  views x5        reading the five views a fast-path call hands over (_torch_views.view)
  dlpack x5       torch's __dlpack__ on the five arrays a DLPack call hands over
  decode          flash_attn_with_kvcache, one new token appended (b 1, h 32/8, d 128, 128 cached
                  keys, int32 cache_seqlens, causal: host-bound, the host cost of a decode call)
  _C.forward_kvcache_views  the extension alone on the decode call's ready views
Then, on CUDA, the GPU time alone (CUDA-graph replays of 20 calls) and a decode step through
flash_attn_with_kvcache (b 1, h 32/8, d 128, 4096 cached keys): eager wall time, graph replay
time, and the replay's output against the eager one. --device cpu runs the host rows only, on the
CPU backend with a b 1 s 1 h 1 d 64 float32 problem (the kernel is about a microsecond).
"""
import argparse
import statistics
import time

import torch

import fastattn
from fastattn import _C
from fastattn._torch_views import view


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def per_call_us(fn, calls):
    fn()
    sync()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def interleaved_ratio(fn, ref, calls, rounds=21):
    """Median over rounds of (fn's time / ref's time) a call: each round times a loop of `calls` calls of
    each, the order alternating per round. This machine's host speed moves between loops of a sequential
    script by up to 2 x (bench/results/2026-11-29-s52.md), more than the two paths differ; a ratio
    within one round sees the same host. Returns (median ratio, min, max)."""
    ratios = []
    for r in range(rounds):
        t = {}
        for name, f in ((("fn", fn), ("ref", ref)) if r % 2 == 0 else (("ref", ref), ("fn", fn))):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            sync()
            t[name] = time.perf_counter() - t0
        ratios.append(t["fn"] / t["ref"])
    return statistics.median(ratios), min(ratios), max(ratios)


def graph_us(fn, reps=20, replays=50):
    """GPU time per call: `reps` calls captured in one graph, replayed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (replays * reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default=None, help="also write the table (markdown) here")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda":
        dt, (b, s, h, h_kv, d) = torch.bfloat16, (1, 128, 16, 4, 128)
    else:
        torch.set_num_threads(1)
        dt, (b, s, h, h_kv, d) = torch.float32, (1, 1, 1, 1, 64)
    q = torch.randn(b, s, h, d, device=dev, dtype=dt)
    k = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    v = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    scale = d ** -0.5
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=dev, dtype=torch.float32)
    opts = _C.Options(None, None, None, None, 0, 0, scale, True, -1, -1, 0.0, False, 0, 0)
    stream = torch.cuda.current_stream().cuda_stream if dev == "cuda" else 0
    views = [view(x) for x in (q, k, v, out, lse)]
    qg = q.clone().requires_grad_()

    rows = []
    with torch.no_grad():
        rows.append(("sdpa", per_call_us(lambda: sdpa(qt, kt, vt, is_causal=True, enable_gqa=True), args.calls)))
        rows.append(("fastattn", per_call_us(lambda: fastattn.flash_attn_func(q, k, v, causal=True), args.calls)))
        rows.append(("fastattn op", per_call_us(
            lambda: torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, scale, True, -1, -1, 0.0),
            args.calls)))
    rows.append(("fastattn grad", per_call_us(lambda: fastattn.flash_attn_func(qg, k, v, causal=True), args.calls)))
    rows.append(("op grad", per_call_us(
        lambda: torch.ops.fastattn.fwd(qg, k, v, None, None, None, None, 0, 0, scale, True, -1, -1, 0.0),
        args.calls)))
    rows.append(("_C.forward_views", per_call_us(
        lambda: _C.forward_views(*views, None, None, None, None, 0, 0, scale, True, -1, -1, 0.0, False, 0, 0,
                                 stream), args.calls)))
    rows.append(("_C.forward", per_call_us(lambda: _C.forward(q, k, v, out, lse, opts, stream), args.calls)))
    rows.append(("views x5", per_call_us(lambda: [view(x) for x in (q, k, v, out, lse)], args.calls)))
    rows.append(("dlpack x5", per_call_us(lambda: [x.__dlpack__() for x in (q, k, v, out, lse)], args.calls)))
    rows += decode_host_rows(dev, dt, d, stream, args.calls)
    rows += transformers_rows(dev, dt, args.calls)
    with torch.no_grad():
        ratio = interleaved_ratio(lambda: fastattn.flash_attn_func(q, k, v, causal=True),
                                  lambda: sdpa(qt, kt, vt, is_causal=True, enable_gqa=True), args.calls)
    ratio_line = (f"fastattn / sdpa a call, interleaved (21 rounds of {args.calls} calls each, order alternating): "
                  f"median **{ratio[0]:.3f}** (min {ratio[1]:.3f}, max {ratio[2]:.3f}); the rows above are sequential")
    if dev == "cpu":
        report([f"# call overhead (CPU backend, torch {torch.__version__}, fastattn {fastattn.__version__})", "",
                f"float32 b{b} s{s} h{h}/{h_kv} d{d} causal, {args.calls} calls per run, best of 5", ""],
               rows, ["", ratio_line], args.out)
        return
    with torch.no_grad():
        gpu_sdpa = graph_us(lambda: sdpa(qt, kt, vt, is_causal=True, enable_gqa=True))
        gpu_fa = graph_us(lambda: fastattn.flash_attn_func(q, k, v, causal=True))

    # Decode step against a KV cache, eager and graph-replayed.
    hq, hk, cache = 32, 8, 4096
    qd = torch.randn(1, 1, hq, d, device=dev, dtype=dt)
    kc = torch.randn(1, cache, hk, d, device=dev, dtype=dt)
    vc = torch.randn(1, cache, hk, d, device=dev, dtype=dt)
    kn = torch.randn(1, 1, hk, d, device=dev, dtype=dt)
    vn = torch.randn(1, 1, hk, d, device=dev, dtype=dt)
    seqlens = torch.tensor([cache - 1], dtype=torch.int32, device=dev)

    def decode():
        return fastattn.flash_attn_with_kvcache(qd, kc, vc, kn, vn, cache_seqlens=seqlens, causal=True)

    with torch.no_grad():
        eager_decode = per_call_us(decode, max(args.calls // 4, 100))
        ref = decode().clone()
        graph_decode = graph_us(decode, reps=1, replays=200)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            replay_out = decode()
        g.replay()
        torch.cuda.synchronize()
        same = torch.equal(ref, replay_out)

    name = torch.cuda.get_device_name()
    report([f"# call overhead ({name}, torch {torch.__version__}, fastattn {fastattn.__version__})", "",
            f"bf16 b{b} s{s} h{h}/{h_kv} d{d} causal, {args.calls} calls per run, best of 5", ""], rows,
           ["", ratio_line, "", f"GPU time per call (graph replay): sdpa {gpu_sdpa:.1f} us, fastattn {gpu_fa:.1f} us", "",
            f"decode (flash_attn_with_kvcache, b1 h{hq}/{hk} d{d}, {cache} keys): eager {eager_decode:.1f} us "
            f"per call, graph replay {graph_decode:.1f} us, replay == eager: {same}"], args.out)


def decode_host_rows(dev, dt, d, stream, calls):
    """Host cost of a decode call (small cache: the kernel takes a few microseconds)."""
    hq, hk, cache = (32, 8, 128) if dev == "cuda" else (1, 1, 8)
    qd = torch.randn(1, 1, hq, d, device=dev, dtype=dt)
    kc, vc = (torch.randn(1, cache, hk, d, device=dev, dtype=dt) for _ in range(2))
    kn, vn = (torch.randn(1, 1, hk, d, device=dev, dtype=dt) for _ in range(2))
    seqlens = torch.tensor([cache - 1], dtype=torch.int32, device=dev)
    rows = []
    with torch.no_grad():
        rows.append(("decode", per_call_us(lambda: fastattn.flash_attn_with_kvcache(
            qd, kc, vc, kn, vn, cache_seqlens=seqlens, causal=True), calls)))
    views_fn = getattr(_C, "forward_kvcache_views", None)
    if views_fn is not None:  # absent in a build from before the views
        od = torch.empty_like(qd)
        ready = [view(x) for x in (qd, kc, vc, kn, vn, od)]
        sv = view(seqlens)
        rows.append(("_C.forward_kvcache_views", per_call_us(lambda: views_fn(
            *ready, None, None, None, sv, None, None, None, True, d ** -0.5, True, -1, -1, 0.0, 0,
            dev != "cuda", 0, 0, stream), calls)))
    return rows


def transformers_rows(dev, dt, calls):
    """One layer's attention of a transformers Llama decode step (h 16/4, d 128, 1501 cached keys;
    (b, h, s, d) tensors as transformers hands them), through the function each registration runs:
    transformers' sdpa_attention_forward (a local copy of its work when transformers is absent) and
    fastattn.hf_attention.attention_forward, and the old way, flash_attn_func on transposes.
    "+ sync" rows synchronize after every call (an eager decode loop that reads its token back):
    the wall time of the call with its GPU work, and the stream-ordered workspace's cost after a sync."""
    import types

    hq, hk, d, keys = (16, 4, 128, 1501) if dev == "cuda" else (2, 1, 64, 33)
    q = torch.randn(1, hq, 1, d, device=dev, dtype=dt)
    k, v = (torch.randn(1, hk, keys, d, device=dev, dtype=dt) for _ in range(2))
    module = types.SimpleNamespace(is_causal=True, num_key_value_groups=hq // hk, training=False)
    try:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward as hf_sdpa
    except ImportError:
        def hf_sdpa(module, q, k, v, mask, scaling=None):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scaling, enable_gqa=True)
            return out.transpose(1, 2).contiguous(), None
    def fa_transposed():
        return fastattn.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                        softmax_scale=d ** -0.5, causal=True)

    fns = {"hf sdpa (decode layer)": lambda: hf_sdpa(module, q, k, v, None, scaling=d ** -0.5)}
    try:
        from fastattn import hf_attention
    except ImportError:  # a tree from before it: its bench registered flash_attn_func on transposes
        fns["hf fastattn (decode layer)"] = fa_transposed
    else:
        fns["hf fastattn (decode layer)"] = lambda: hf_attention.attention_forward(module, q, k, v, None,
                                                                                   scaling=d ** -0.5)
        fns["flash_attn_func on transposes (decode layer)"] = fa_transposed
    rows = []
    with torch.no_grad():
        for name, fn in fns.items():
            rows.append((name, per_call_us(fn, calls)))
        if dev == "cuda":
            for name in list(fns)[:2]:
                fn = fns[name]
                rows.append((name + " + sync", per_call_us(lambda fn=fn: (fn(), torch.cuda.synchronize()),
                                                           max(calls // 4, 100))))
    return rows


def report(head, rows, tail, out):
    lines = head + ["| path | host us / call |", "| --- | ---: |"]
    lines += [f"| {n} | {us:.1f} |" for n, us in rows] + tail
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
