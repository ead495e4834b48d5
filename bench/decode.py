#!/usr/bin/env python3
"""Decode and short-prefill attention (issue #30): fastattn's split-KV beside FA3's split-KV decode
path, SDPA-cuDNN and the HBM floor, GPU time only.

Problem: q (b, s_q, 32, 128), k/v (b, s_k, 8, 128), bf16, no mask (s_q 1, 4, 16 against s_k
1k-128k, batch 1-128; cases whose K/V exceed --max-kv-gib are left out). --heads-kv 32: MHA (each
q head its own K/V: unpacked tiles).

Method
- GPU time per call: a CUDA graph of --calls calls (captured once per peer and case), replayed
  --replays times, each replay timed by CUDA events; the median replay / calls. The peers of a case
  (and --sweep's counts) replay interleaved, one replay each per round in an order rotated per round. Host launch work is
  not in it; the gaps between a graph's kernels are (as in a graph-replayed decode loop).
- The calls of a graph rotate over several K/V copies (at least --rotate-mib in all, at most 8
  copies), so that each call reads its K/V from HBM as a decode step over many layers does, not
  from the 50 MB L2 that the previous call filled.
- HBM floor = K/V bytes / copy bandwidth measured in the same run (a 1 GiB device-to-device copy,
  bytes read + written over its time); "x floor" = time / floor.
- Peers: fastattn through its C ABI (libfastattn.so by ctypes; num_splits 0 = its heuristic, and
  num_splits 1 = unsplit for reference); FA3 (bench/fa3: libfa3decode.so, FA3's own heuristic
  num_splits = 0, its split kernel and its combine, as flash_attn_with_kvcache runs this call);
  SDPA with the cuDNN backend on transposed (b, h, s, d) views with enable_gqa (expanded K/V
  where this torch's cuDNN path refuses GQA).
- FlashInfer (--flashinfer, when `import flashinfer` works): planned once a case (its own split heuristic),
  the contiguous K/V viewed as pages of 64 in order (no copy), CUDA-graph mode. s_q 1:
  BatchDecodeWithPagedKVCacheWrapper, two columns: CUDA-core decode (`fi`) and tensor-core decode (`fi-tc`, the
  prefill kernel FlashInfer recommends for GQA >= 4); s_q > 1: BatchPrefillWithPagedKVCacheWrapper on its fa2
  backend (the same kernel family as `fi-tc`, in that column; `fi` stays '-'). Its JIT compiles each module on
  the first plan (the time is printed).
- --between-mib N: every call of the main table follows a memset of N MiB (the L2 evicted, as a decode
  step's other kernels do between two attention calls); a graph of the memsets alone runs in the same
  rounds and its time is subtracted.
- Check: each peer's output against fastattn's (max |diff|; bf16 noise is ~0.01).

Usage: python3 bench/decode.py --lib build/src/libfastattn.so [--fa3-lib out/libfa3decode.so]
           [--out bench/results/DATE-h100-decode.md] [--quick]
       python3 bench/decode.py --lib ... --sweep [--sweep-batches 1 --sweep-sk 4096,16384 --sweep-counts 4,8,16]
       python3 bench/decode.py --lib ... --timeline fastattn:1:4096:8,fa3:1:4096:0 --trace tl.json
           && python3 bench/kernel_timeline.py tl.json
"""
import argparse
import contextlib
import ctypes
import datetime
import importlib.util
import os
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
H, H_KV, D = 32, 8, 128


def load_stream_floor():
    """bench/stream_floor.py: the copy bandwidth that defines the HBM floor, measured one way for both scripts."""
    spec = importlib.util.spec_from_file_location("stream_floor", os.path.join(HERE, "stream_floor.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_peers_module():
    """bench/run-peers.py's ctypes structs (FaArgs, FaTensor): one definition of the C ABI's layout."""
    spec = importlib.util.spec_from_file_location("run_peers", os.path.join(HERE, "run-peers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Fa3DecodeArgs(ctypes.Structure):
    """bench/fa3/fa3_decode_peer.cu's Fa3DecodeArgs."""
    _fields_ = [(n, ctypes.c_void_p) for n in ("q", "k", "v", "out", "lse", "workspace")] + [
        (n, ctypes.c_int64 * 3) for n in ("q_stride", "k_stride", "v_stride", "o_stride")] + [
        (n, ctypes.c_int32) for n in ("b", "s_q", "s_k", "h", "h_k", "d", "num_splits", "num_sm")] + [
        ("scale", ctypes.c_float)]


def load_flashinfer():
    """flashinfer, or None (printed why) where its wheel or its JIT dependencies are missing."""
    try:
        import flashinfer
    except Exception as e:  # ImportError, or a dependency's own failure at import
        print(f"flashinfer: not importable ({type(e).__name__}: {e}); its columns stay '-'", flush=True)
        return None
    print(f"flashinfer {flashinfer.__version__}", flush=True)
    return flashinfer


FI_PAGE = 64  # FlashInfer's page size here: a contiguous (b, s_k, h_kv, d) cache is b * s_k / 64 pages in order


def int_list(text):
    """'1,4,16' -> (1, 4, 16); None stays None."""
    if text is None:
        return None
    values = tuple(int(v) for v in text.split(",") if v.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a comma-separated list of positive integers, not {text!r}")
    return values


def cases(quick, sqs=None, batches=None, sks=None):
    """(s_q, batch, s_k) in table order: the quick or the full set, each axis replaced where given."""
    sqs = sqs or ((1,) if quick else (1, 4, 16))
    batches = batches or ((1, 8, 64) if quick else (1, 8, 32, 128))
    sks = sks or ((4096, 32768) if quick else (1024, 4096, 16384, 65536, 131072))
    return [(sq, b, sk) for sq in sqs for b in batches for sk in sks]


def main():
    global H_KV
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libfastattn.so")
    ap.add_argument("--fa3-lib", default=os.environ.get("FASTATTN_FA3_DECODE_LIB"), help="libfa3decode.so")
    ap.add_argument("--out", help="markdown table to write (also printed)")
    ap.add_argument("--quick", action="store_true", help="a few cases")
    ap.add_argument("--sq", type=int_list, help="s_q values (comma-separated), instead of the set's")
    ap.add_argument("--batches", type=int_list, help="batches (comma-separated), instead of the set's")
    ap.add_argument("--sk", type=int_list, help="key lengths (comma-separated), instead of the set's")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--replays", type=int, default=15)
    ap.add_argument("--rotate-mib", type=int, default=200)
    ap.add_argument("--between-mib", type=int, default=0,
                    help="the main table: before every call of a graph a memset of this many MiB (> the 50 MB L2, "
                         "e.g. 128), as a decode step's other kernels evict the L2 and the attention kernel's code "
                         "between two attention calls; a graph of the memsets alone runs interleaved with the peers "
                         "and its time is subtracted")
    ap.add_argument("--max-kv-gib", type=float, default=24.0)
    ap.add_argument("--splits", type=int, default=0, help="the fastattn column's num_splits (0: its heuristic)")
    ap.add_argument("--heads-kv", type=int, default=H_KV, help="KV heads (of 32 q heads): 8 GQA 4, 32 MHA")
    ap.add_argument("--flashinfer", action="store_true",
                    help="also FlashInfer (s_q 1: its batch decode, CUDA-core and tensor-core kernels; s_q > 1: its paged "
                         "prefill on the fa2 backend) when importable")
    ap.add_argument("--label", default="", help="commit or note for the table's heading")
    ap.add_argument("--sweep", action="store_true",
                    help="instead: fastattn's time against forced split counts (s_q 1, or --sq's values), for the heuristic")
    ap.add_argument("--sweep-batches", default="1,2,4,8", help="--sweep: batches (comma-separated)")
    ap.add_argument("--sweep-sk", default="1024,4096,16384,65536", help="--sweep: key lengths")
    ap.add_argument("--sweep-counts", default="1,2,3,4,6,8,12,16,24,32,48,64", help="--sweep: forced split counts")
    ap.add_argument("--profile", action="store_true",
                    help="also: each peer's kernels (torch profiler, eager calls) at batch 1, s_k 4k and 32k")
    ap.add_argument("--timeline", metavar="CASES",
                    help="instead: graph replays of CASES (peer:batch:s_k:splits, comma-separated; peer fastattn, "
                         "fa3 or cudnn; splits 0 = heuristic) each inside an NVTX range named after it, for "
                         "nsys --cuda-graph-trace=node or --trace (bench/kernel_timeline.py reads either)")
    ap.add_argument("--once", metavar="CASES",
                    help="instead: CASES as --timeline, each as 3 eager warm-up calls and one eager call inside an "
                         "NVTX range named after the case (':' as '_'), for ncu (bench/decode-ncu.sh)")
    ap.add_argument("--trace", help="--timeline: run the cases under the torch profiler and write its chrome "
                                    "trace (every graph node's kernel) to this file")
    args = ap.parse_args()
    if args.heads_kv < 1 or H % args.heads_kv:
        ap.error(f"--heads-kv must divide {H}")
    H_KV = args.heads_kv

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rp = load_peers_module()
    fa = ctypes.CDLL(args.lib)
    fa.fastattn_forward.argtypes = [ctypes.POINTER(rp.FaArgs), ctypes.c_void_p]
    fa.fastattn_last_error.restype = ctypes.c_char_p
    fa.fastattn_args_init.argtypes = [ctypes.POINTER(rp.FaArgs)]
    tensor_of = rp.FastAttn._tensor.__get__(rp.FastAttn.__new__(rp.FastAttn))
    fa3 = None
    if args.fa3_lib:
        fa3 = ctypes.CDLL(args.fa3_lib)
        for fn in ("fa3_decode", "fa3_decode_workspace_bytes", "fa3_decode_splits"):
            getattr(fa3, fn).argtypes = [ctypes.POINTER(Fa3DecodeArgs)] + (
                [ctypes.c_void_p] if fn == "fa3_decode" else [])
        fa3.fa3_decode_workspace_bytes.restype = ctypes.c_int64
        fa3.fa3_decode_last_error.restype = ctypes.c_char_p

    fi = load_flashinfer() if args.flashinfer else None

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    sp = ctypes.c_void_p(stream.cuda_stream)

    copy_bw = load_stream_floor().copy_bandwidth()  # bytes read + written per second (the floor's rate)

    def fastattn_call(q, k, v, out, lse, splits):
        a = rp.FaArgs()
        fa.fastattn_args_init(ctypes.byref(a))
        a.q, a.k, a.v, a.out, a.lse = (tensor_of(t) for t in (q, k, v, out, lse))
        a.backend = 2
        a.num_splits = splits
        a.check_index_arrays = 0
        ref = ctypes.byref(a)

        def run():
            if fa.fastattn_forward(ref, sp) != 0:
                raise RuntimeError(fa.fastattn_last_error().decode())
        run.keep = (a, q, k, v, out, lse)
        return run

    def fa3_call(q, k, v, out, lse):
        a = Fa3DecodeArgs()
        b, sq, h, d = q.shape
        a.q, a.k, a.v, a.out, a.lse = (t.data_ptr() for t in (q, k, v, out, lse))
        for name, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", out)):
            getattr(a, name)[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.b, a.s_q, a.s_k, a.h, a.h_k, a.d = b, sq, k.shape[1], h, k.shape[2], d
        a.num_splits = 0
        a.num_sm = props.multi_processor_count
        a.scale = d ** -0.5
        ws = torch.empty(max(1, fa3.fa3_decode_workspace_bytes(ctypes.byref(a))), dtype=torch.uint8, device=dev)
        a.workspace = ws.data_ptr()
        ref = ctypes.byref(a)

        def run():
            if fa3.fa3_decode(ref, sp) != 0:
                raise RuntimeError(fa3.fa3_decode_last_error().decode())
        run.keep = (a, ws, q, k, v, out, lse)
        run.splits = fa3.fa3_decode_splits(ref)
        return run

    gqa_ok = [True]

    def cudnn_call(q, k, v, last):
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))

        def run():  # SDPA allocates its output (no copy into ours inside the timed graph)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                if gqa_ok[0]:
                    try:
                        r = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
                    except RuntimeError:
                        gqa_ok[0] = False
                if not gqa_ok[0]:
                    g = H // H_KV
                    r = F.scaled_dot_product_attention(qt, kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1))
            last[0] = r
        return run

    fi_compile_s = {}  # JIT time of each FlashInfer kernel kind's first plan (once a process)

    def flashinfer_calls(qs, ks, vs, outs, pick, b, sq, sk, tensor_cores):
        """One FlashInfer wrapper planned for (b, sq, sk): its decode wrapper at s_q 1 (CUDA-core or tensor-core
        kernel), its paged prefill wrapper on the fa2 backend above; a call per picked copy, each writing its out."""
        pages = sk // FI_PAGE
        indptr = torch.arange(b + 1, dtype=torch.int32, device=dev) * pages
        indices = torch.arange(b * pages, dtype=torch.int32, device=dev)
        last_len = torch.full((b,), FI_PAGE, dtype=torch.int32, device=dev)
        ws = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
        t0 = time.perf_counter()
        if sq == 1:
            w = fi.BatchDecodeWithPagedKVCacheWrapper(
                ws, "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores, paged_kv_indptr_buffer=indptr.clone(),
                paged_kv_indices_buffer=indices.clone(), paged_kv_last_page_len_buffer=last_len.clone())
            w.plan(indptr, indices, last_len, H, H_KV, D, FI_PAGE, q_data_type=torch.bfloat16,
                   kv_data_type=torch.bfloat16, sm_scale=D ** -0.5)
        else:
            qo_indptr = torch.arange(b + 1, dtype=torch.int32, device=dev) * sq
            w = fi.BatchPrefillWithPagedKVCacheWrapper(
                ws, "NHD", use_cuda_graph=True, qo_indptr_buf=qo_indptr.clone(), paged_kv_indptr_buf=indptr.clone(),
                paged_kv_indices_buf=indices.clone(), paged_kv_last_page_len_buf=last_len.clone(), backend="fa2")
            w.plan(qo_indptr, indptr, indices, last_len, H, H_KV, D, FI_PAGE, causal=False, sm_scale=D ** -0.5,
                   q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        torch.cuda.synchronize()
        kind = ("fi-tc" if tensor_cores else "fi") + ("" if sq == 1 else " (prefill)")
        if kind not in fi_compile_s:
            fi_compile_s[kind] = time.perf_counter() - t0
            print(f"flashinfer {kind}: first plan (JIT build or load) {fi_compile_s[kind]:.1f} s", flush=True)

        def one(i):
            q, o = qs[i].view(b * sq, H, D), outs[i].view(b * sq, H, D)
            kc, vc = ks[i].view(-1, FI_PAGE, H_KV, D), vs[i].view(-1, FI_PAGE, H_KV, D)

            def run():
                w.run(q, (kc, vc), out=o)
            run.keep = (w, ws, indptr, indices, last_len)
            return run
        return [one(i) for i in pick]

    between = torch.empty(args.between_mib << 20, dtype=torch.uint8, device=dev) if args.between_mib else None

    def graph_of(calls, evict=False):
        """calls: one callable per call. Two eager warm-up calls, then the graph captured over them all and
        replayed once; evict: each call preceded by the --between-mib memset. Returns (graph, number of calls)."""
        for c in calls[:2]:
            c()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for c in calls:
                if evict:
                    between.zero_()
                c()
        g.replay()
        torch.cuda.synchronize()
        return g, len(calls)

    def interleaved_us(graphs):
        """graphs: name -> graph_of(...). --replays rounds; in each every graph replays once, timed by CUDA
        events, in an order rotated by one per round, so that no graph always runs first or after the same
        peer (a graph's place in a sequence moved its time by 5-20 %: notes, session 51). Median replay time
        / calls per name, in us."""
        names = list(graphs)
        times = {n: [] for n in names}
        for r in range(args.replays):
            for n in names[r % len(names):] + names[:r % len(names)]:
                g, count = graphs[n]
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(stream)
                g.replay()
                e1.record(stream)
                e1.synchronize()
                times[n].append(e0.elapsed_time(e1) * 1e3 / count)
        return {n: statistics.median(t) for n, t in times.items()}

    def graph_us(calls):
        """calls: one callable per call of the graph. Median replay time / len(calls), in us."""
        return interleaved_us({"one": graph_of(calls)})["one"]

    def make_inputs(b, sq, sk, copies):
        torch.manual_seed(0)
        qs = [torch.randn(b, sq, H, D, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        ks = [torch.randn(b, sk, H_KV, D, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        vs = [torch.randn(b, sk, H_KV, D, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        return qs, ks, vs

    def copies_for(kv_bytes):
        n = max(1, min(8, -(-(args.rotate_mib << 20) // kv_bytes)))
        return n if n * kv_bytes <= args.max_kv_gib * (1 << 30) else 1

    if args.sweep:
        counts = [int(x) for x in args.sweep_counts.split(",")]
        # With --fa3-lib, FA3's decode replays in the same rounds (a peer's kernels in the rotation, as in the main table).
        extra = ["fa3"] if fa3 is not None else []
        lines = ["| s_q | batch | s_k | floor us | " + " | ".join([f"ns{n}" for n in counts] + extra) + " | best |",
                 "|---|---|---|---|" + "---|" * (len(counts) + len(extra) + 1)]
        for sq, b, sk in ((sq, b, sk) for sq in (args.sq or [1]) for b in (int(x) for x in args.sweep_batches.split(","))
                          for sk in (int(x) for x in args.sweep_sk.split(","))):
            kv_bytes = 2 * b * sk * H_KV * D * 2
            copies = copies_for(kv_bytes)
            qs, ks, vs = make_inputs(b, sq, sk, copies)
            outs = [torch.empty_like(qs[0]) for _ in range(copies)]
            lses = [torch.empty(b, H, sq, device=dev, dtype=torch.float32) for _ in range(copies)]
            pick = [i % copies for i in range(args.calls)]
            graphs = {n: graph_of([fastattn_call(qs[i], ks[i], vs[i], outs[i], lses[i], n) for i in pick]) for n in counts}
            if extra:
                outs3 = [torch.empty_like(qs[0]) for _ in range(copies)]
                graphs["fa3"] = graph_of([fa3_call(qs[i], ks[i], vs[i], outs3[i], lses[i]) for i in pick])
            per = interleaved_us(graphs)
            del graphs
            t = [per[n] for n in counts]
            best = counts[t.index(min(t))]
            lines.append(f"| {sq} | {b} | {sk} | {kv_bytes / copy_bw * 1e6:.1f} | " +
                         " | ".join(f"{x:.1f}" for x in t + [per[e] for e in extra]) + f" | {best} |")
            print(lines[-1], flush=True)
            del qs, ks, vs, outs, lses
            torch.cuda.empty_cache()
        text = (f"# fastattn decode time (us) against forced num_splits, s_q {','.join(map(str, args.sq or [1]))}, "
                f"h {H}/{H_KV}, d {D}, bf16 "
                f"({props.name}, {datetime.date.today().isoformat()}, {args.label})\n\n" + "\n".join(lines) + "\n")
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        return

    def case_calls(case, copies, count):
        """A --timeline / --once case (peer:batch:s_k:splits; peer fastattn, fa3 or cudnn; splits 0 = heuristic):
        `count` calls over `copies` K/V copies in turn (each call keeps its tensors alive)."""
        peer, b, sk, n = case.split(":")
        b, sk, n = int(b), int(sk), int(n)
        qs, ks, vs = make_inputs(b, 1, sk, copies)
        outs = [torch.empty_like(qs[0]) for _ in range(copies)]
        lses = [torch.empty(b, H, 1, device=dev, dtype=torch.float32) for _ in range(copies)]
        pick = [i % copies for i in range(count)]
        if peer == "fastattn":
            return [fastattn_call(qs[i], ks[i], vs[i], outs[i], lses[i], n) for i in pick]
        if peer == "fa3":
            return [fa3_call(qs[i], ks[i], vs[i], outs[i], lses[i]) for i in pick]
        return [cudnn_call(qs[i], ks[i], vs[i], [None]) for i in pick]

    def run_timeline(record_function):
        """--timeline's cases, each inside an NVTX range (and a profiler range when tracing)."""
        for case in args.timeline.split(","):
            _, b, sk, _ = case.split(":")
            calls = case_calls(case, copies_for(2 * int(b) * int(sk) * H_KV * D * 2), args.calls)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(case)
            with record_function(case) if record_function else contextlib.nullcontext():
                us = graph_us(calls)
                torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            print(f"{case}: {us:.2f} us per call", flush=True)
            del calls
            torch.cuda.empty_cache()

    if args.once:
        for case in args.once.split(","):
            fn = case_calls(case, 1, 1)[0]
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(case.replace(":", "_"))
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            print(f"{case}: ran", flush=True)
            del fn
            torch.cuda.empty_cache()
        return

    if args.timeline:
        from torch.profiler import ProfilerActivity, profile, record_function
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) if args.trace else None
        with prof if prof is not None else contextlib.nullcontext():
            run_timeline(record_function if prof is not None else None)
        if prof is not None:
            prof.export_chrome_trace(args.trace)
        return

    if args.profile:
        # What a stream-ordered allocation costs inside a graph: fastattn's split call takes its
        # partials with cudaMallocAsync / cudaFreeAsync (graph memory nodes); a graph of such pairs alone.
        import glob
        rt = None
        for cand in ["libcudart.so", "libcudart.so.13"] + glob.glob(
                os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcudart.so*")):
            try:
                rt = ctypes.CDLL(cand)
                break
            except OSError:
                pass
        if rt is not None:
            ptr = ctypes.c_void_p()

            def alloc_pair():
                assert rt.cudaMallocAsync(ctypes.byref(ptr), ctypes.c_size_t(1 << 20), sp) == 0
                assert rt.cudaFreeAsync(ptr, sp) == 0
            print(f"graph of cudaMallocAsync + cudaFreeAsync (1 MiB) pairs: {graph_us([alloc_pair] * args.calls):.2f} us a pair")
        from torch.profiler import ProfilerActivity, profile
        for sk in (4096, 32768):
            qs, ks, vs = make_inputs(1, 1, sk, 1)
            out = torch.empty_like(qs[0])
            lse = torch.empty(1, H, 1, device=dev, dtype=torch.float32)
            peers = {"fastattn": fastattn_call(qs[0], ks[0], vs[0], out, lse, 0),
                     "cudnn": cudnn_call(qs[0], ks[0], vs[0], [None])}
            if fa3 is not None:
                peers["fa3"] = fa3_call(qs[0], ks[0], vs[0], torch.empty_like(out), lse)
            for name, fn in peers.items():
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        fn()
                    torch.cuda.synchronize()
                print(f"== profile b1 s_k {sk}: {name} (20 eager calls)")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=6, max_name_column_width=70))

    rows = []
    for sq, b, sk in cases(args.quick, args.sq, args.batches, args.sk):
        kv_bytes = 2 * b * sk * H_KV * D * 2
        if kv_bytes > args.max_kv_gib * (1 << 30):
            continue
        copies = copies_for(kv_bytes)
        qs, ks, vs = make_inputs(b, sq, sk, copies)
        outs = {p: [torch.empty_like(qs[0]) for _ in range(copies)] for p in ("fa", "fa1", "fa3", "fi", "fi-tc")}
        lses = [torch.empty(b, H, sq, device=dev, dtype=torch.float32) for _ in range(copies)]
        pick = [i % copies for i in range(args.calls)]
        row = {"sq": sq, "b": b, "sk": sk, "floor": kv_bytes / copy_bw * 1e6}
        ev = between is not None
        graphs = {"fastattn": graph_of([fastattn_call(qs[i], ks[i], vs[i], outs["fa"][i], lses[i], args.splits)
                                        for i in pick], ev),
                  "fastattn-1": graph_of([fastattn_call(qs[i], ks[i], vs[i], outs["fa1"][i], lses[i], 1) for i in pick],
                                         ev)}
        if ev:
            graphs["memsets"] = graph_of([lambda: None for _ in pick], True)
        if fa3 is not None:
            calls = [fa3_call(qs[i], ks[i], vs[i], outs["fa3"][i], lses[i]) for i in pick]
            row["fa3-splits"] = calls[0].splits
            graphs["fa3"] = graph_of(calls, ev)
        if fi is not None and sk % FI_PAGE == 0:
            for kind in ("fi", "fi-tc") if sq == 1 else ("fi-tc",):  # s_q > 1: the paged prefill (fa2)
                try:
                    graphs[kind] = graph_of(flashinfer_calls(qs, ks, vs, outs[kind], pick, b, sq, sk, kind == "fi-tc"),
                                            ev)
                except Exception as e:  # a JIT or plan failure: reported, the other peers still run
                    print(f"flashinfer {kind} b{b} s_k {sk}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        last = [None]  # the graph's last call's output (of K/V copy pick[-1]) after the replays
        graphs["cudnn"] = graph_of([cudnn_call(qs[i], ks[i], vs[i], last) for i in pick], ev)
        row.update(interleaved_us(graphs))
        if ev:  # each peer's time less the memsets' (their own graph, timed in the same rounds)
            memsets = row.pop("memsets")
            for kind in ("fastattn", "fastattn-1", "fa3", "fi", "fi-tc", "cudnn"):
                if kind in row:
                    row[kind] -= memsets
            row["memset-us"] = memsets
        del graphs
        ref = outs["fa"][0].float()
        row["diff-1"] = (outs["fa1"][0].float() - ref).abs().max().item()
        for kind in ("fa3", "fi", "fi-tc"):
            if kind in row:
                row["diff-" + kind] = (outs[kind][0].float() - ref).abs().max().item()
        row["diff-cudnn"] = (last[0].transpose(1, 2).float() - outs["fa"][pick[-1]].float()).abs().max().item()
        rows.append(row)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        del qs, ks, vs, outs, lses, last
        torch.cuda.empty_cache()

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip()
    except OSError:
        commit = ""
    sqs_run = "/".join(str(v) for v in sorted({r["sq"] for r in rows})) or "-"
    lines = [f"# Decode (s_q {sqs_run}, h {H}/{H_KV}, d {D}, bf16): GPU time per call",
             "",
             f"{props.name}, {datetime.date.today().isoformat()}, fastattn {args.label or commit}; "
             f"torch {torch.__version__}; copy bandwidth {copy_bw / 1e12:.2f} TB/s (read + written).",
             f"Graphs of {args.calls} calls rotating over K/V copies of >= {args.rotate_mib} MiB in all, "
             f"median of {args.replays} replays / calls, peers interleaved per round (bench/decode.py). floor = K/V bytes / copy bandwidth; "
             "(x) = time / floor. fastattn: num_splits 0 (heuristic); fastattn ns1: unsplit. "
             "fa3: FA3 0251105's decode path with its own split heuristic (splits in brackets) and combine. "
             "cudnn: SDPA's cuDNN backend" + ("" if gqa_ok[0] else " (K/V expanded: this torch's cuDNN refused GQA)") + "."
             + (f" fi / fi-tc: FlashInfer {fi.__version__}'s batch decode, CUDA-core / tensor-core kernel, pages of "
                f"{FI_PAGE}; at s_q > 1 fi-tc is its paged prefill (fa2 backend)." if fi is not None else "")
             + (f" Cold calls: every call follows a memset of {args.between_mib} MiB (the L2 evicted, as between "
                "two layers' attention); the memsets' own time (a graph of them alone, in the same "
                "rounds: " + ", ".join(f"{r['memset-us']:.1f}" for r in rows) + " us a call by row) is subtracted."
                if between is not None else ""),
             "",
             "| s_q | batch | s_k | floor us | fastattn us | fastattn ns1 us | fa3 us | cudnn us | fastattn / fa3 "
             + ("| fi us | fi-tc us | fastattn / best fi " if fi is not None else "")
             + "| max diff (ns1, fa3, cudnn" + (", fi, fi-tc" if fi is not None else "") + ") |",
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if fi is not None else "") + "---|"]

    def cell(r, key):
        if key not in r:
            return "-"
        return f"{r[key]:.1f} ({r[key] / r['floor']:.2f}x)"
    for r in rows:
        fa3_cell = cell(r, "fa3") + (f" [{r['fa3-splits']}]" if "fa3-splits" in r else "")
        vs = f"{r['fastattn'] / r['fa3']:.2f}" if "fa3" in r else "-"
        diff_keys = ("diff-1", "diff-fa3", "diff-cudnn") + (("diff-fi", "diff-fi-tc") if fi is not None else ())
        diffs = ", ".join(f"{r[k]:.3f}" if k in r else "-" for k in diff_keys)
        fi_cells = ""
        if fi is not None:
            best = min((r[k] for k in ("fi", "fi-tc") if k in r), default=None)
            fi_cells = (f"{cell(r, 'fi')} | {cell(r, 'fi-tc')} | "
                        + (f"{r['fastattn'] / best:.2f}" if best else "-") + " | ")
        lines.append(f"| {r['sq']} | {r['b']} | {r['sk']} | {r['floor']:.1f} | {cell(r, 'fastattn')} | "
                     f"{cell(r, 'fastattn-1')} | {fa3_cell} | {cell(r, 'cudnn')} | {vs} | {fi_cells}{diffs} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
