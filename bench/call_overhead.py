#!/usr/bin/env python3
"""Per-call host cost of fastattn against SDPA in the host-bound regime, and a CUDA-graph decode.

    python bench/call_overhead.py [--calls 2000] [--out results.md]

Rows (bf16, b 1, s 128, h 16/4, d 128, causal; the kernels take a few microseconds, so a loop of
calls without a sync measures what the host spends per call):
  sdpa            torch.nn.functional.scaled_dot_product_attention (enable_gqa)
  fastattn        fastattn.flash_attn_func under torch.no_grad (the direct path)
  fastattn op     torch.ops.fastattn.fwd (the custom op: what autograd/torch.compile run)
  fastattn grad   flash_attn_func with q.requires_grad (custom op + autograd bookkeeping)
  _C.forward      the extension alone (DLPack import, validation, launch): the C++ call's cost
  dlpack x5       torch's __dlpack__ on the five arrays a call hands over
Then the GPU time alone (CUDA-graph replays of 20 calls) and a decode step through
flash_attn_with_kvcache (b 1, h 32/8, d 128, 4096 cached keys): eager wall time, graph replay
time, and the replay's output against the eager one.
"""
import argparse
import time

import torch

import fastattn
from fastattn import _C


def per_call_us(fn, calls):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


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
    args = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    b, s, h, h_kv, d = 1, 128, 16, 4, 128
    q = torch.randn(b, s, h, d, device=dev, dtype=dt)
    k = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    v = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    scale = d ** -0.5
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=dev, dtype=torch.float32)
    opts = _C.Options(None, None, None, None, 0, 0, scale, True, -1, -1, 0.0, False, 0, 0)
    stream = torch.cuda.current_stream().cuda_stream
    qg = q.clone().requires_grad_()

    rows = []
    with torch.no_grad():
        rows.append(("sdpa", per_call_us(lambda: sdpa(qt, kt, vt, is_causal=True, enable_gqa=True), args.calls)))
        rows.append(("fastattn", per_call_us(lambda: fastattn.flash_attn_func(q, k, v, causal=True), args.calls)))
        rows.append(("fastattn op", per_call_us(
            lambda: torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, scale, True, -1, -1, 0.0),
            args.calls)))
    rows.append(("fastattn grad", per_call_us(lambda: fastattn.flash_attn_func(qg, k, v, causal=True), args.calls)))
    rows.append(("_C.forward", per_call_us(lambda: _C.forward(q, k, v, out, lse, opts, stream), args.calls)))
    rows.append(("dlpack x5", per_call_us(lambda: [x.__dlpack__() for x in (q, k, v, out, lse)], args.calls)))
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
    lines = [f"# call overhead ({name}, torch {torch.__version__}, fastattn {fastattn.__version__})", "",
             f"bf16 b{b} s{s} h{h}/{h_kv} d{d} causal, {args.calls} calls per run, best of 5", "",
             "| path | host us / call |", "| --- | ---: |"]
    lines += [f"| {n} | {us:.1f} |" for n, us in rows]
    lines += ["", f"GPU time per call (graph replay): sdpa {gpu_sdpa:.1f} us, fastattn {gpu_fa:.1f} us", "",
              f"decode (flash_attn_with_kvcache, b1 h{hq}/{hk} d{d}, {cache} keys): eager {eager_decode:.1f} us "
              f"per call, graph replay {graph_decode:.1f} us, replay == eager: {same}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
