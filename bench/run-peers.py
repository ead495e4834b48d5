#!/usr/bin/env python3
"""Forward attention, fastattn beside its peers in one process, on the GPU.

Peers: torch SDPA with the cuDNN, flash (FA2) and memory-efficient backends, and FlexAttention.
fastattn is reached through its C ABI (libfastattn.so, by ctypes), so this needs no Python build.

Timing: for each (case, peer), 5 warm-up calls, then 30 calls each between two CUDA events;
the median is reported. FLOPs: 4 * b * h_q * d * (kept (i, j) pairs per head), i.e. dense
4*b*h*s_q*s_k*d, causal about half of it (exact pair count), windows by their pair count.
Writes peers.json and peers.md into --out.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 256  # one compile per shape; never fall back to eager
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    FLEX = torch.compile(flex_attention, dynamic=False)
except Exception:  # noqa: BLE001 - Flex is optional
    FLEX = None


class FaTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("stride", ctypes.c_int64 * 4), ("dtype", ctypes.c_int32), ("device", ctypes.c_int32),
                ("device_index", ctypes.c_int32)]


class FaArgs(ctypes.Structure):
    _fields_ = [("q", FaTensor), ("k", FaTensor), ("v", FaTensor), ("out", FaTensor), ("lse", FaTensor),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
                ("cu_seqlens_size", ctypes.c_int64), ("seqused_q", ctypes.c_void_p),
                ("seqused_k", ctypes.c_void_p), ("max_seqlen_q", ctypes.c_int32),
                ("max_seqlen_k", ctypes.c_int32), ("check_index_arrays", ctypes.c_int32),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int32), ("window_left", ctypes.c_int32),
                ("window_right", ctypes.c_int32), ("softcap", ctypes.c_float), ("backend", ctypes.c_int32),
                ("num_threads", ctypes.c_int32)]


DT = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}


def fa_tensor(t):
    ft = FaTensor()
    ft.data = t.data_ptr()
    ft.ndim = t.dim()
    for i in range(t.dim()):
        ft.shape[i] = t.shape[i]
        ft.stride[i] = t.stride(i)
    ft.dtype = DT[t.dtype]
    ft.device = 1 if t.is_cuda else 0
    ft.device_index = t.device.index or 0
    return ft


class FastAttn:
    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)
        self.lib.fastattn_forward.argtypes = [ctypes.POINTER(FaArgs), ctypes.c_void_p]
        self.lib.fastattn_last_error.restype = ctypes.c_char_p
        self.lib.fastattn_args_init.argtypes = [ctypes.POINTER(FaArgs)]

    def forward_fn(self, q, k, v, causal, window):
        """Returns a no-argument callable running our forward on (b, s, h, d) tensors."""
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device, dtype=torch.float32)
        a = FaArgs()
        self.lib.fastattn_args_init(ctypes.byref(a))
        a.q, a.k, a.v, a.out, a.lse = (fa_tensor(t) for t in (q, k, v, out, lse))
        a.causal = int(causal)
        a.window_left, a.window_right = window
        a.backend = 2
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        ref = ctypes.byref(a)

        def run():
            rc = self.lib.fastattn_forward(ref, stream)
            if rc != 0:
                raise RuntimeError(self.lib.fastattn_last_error().decode())
            return out
        return run


def kept_pairs(sq, sk, causal, window):
    wl, wr = window
    if causal:
        wr = 0
    total = 0
    if wl < 0 and wr < 0:
        return sq * sk
    for i in range(sq):
        diag = i + sk - sq
        lo = 0 if wl < 0 else max(0, diag - wl)
        hi = sk if wr < 0 else min(sk, diag + wr + 1)
        total += max(0, hi - lo)
    return total


def time_ms(fn, warmup=5, reps=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def cases(preset):
    out = []
    seqs = [1024, 4096, 8192, 16384] if preset == "full" else [1024, 8192]
    dims = [64, 128, 256] if preset == "full" else [128]
    for d in dims:
        for s in seqs:
            for causal in (False, True):
                out.append(dict(name=f"dense d{d} s{s} {'causal' if causal else 'full'}", b=16384 // s, s=s,
                                h=2048 // d, hkv=2048 // d, d=d, causal=causal, window=(-1, -1), dtype=torch.bfloat16))
    out.append(dict(name="gqa b4 s4096 h64/8 d128 fp16", b=4, s=4096, h=64, hkv=8, d=128, causal=False,
                    window=(-1, -1), dtype=torch.float16))
    for d, h in ((64, 32), (128, 16)):
        out.append(dict(name=f"local(64,0) d{d} s8192", b=2, s=8192, h=h, hkv=h, d=d, causal=False,
                        window=(64, 0), dtype=torch.bfloat16))
    return out


def causal_mod(b, h, qi, kj):
    return qi >= kj


def window_mod(left):
    """Sliding window (left, 0): keys in [i - left, i]."""
    def mod(b, h, qi, kj):
        return (qi >= kj) & (qi - kj <= left)
    return mod


def peers_for(c, fa):
    b, s, h, hkv, d, dt = c["b"], c["s"], c["h"], c["hkv"], c["d"], c["dtype"]
    q = torch.randn(b, s, h, d, device="cuda", dtype=dt)
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=dt)
    v = torch.randn(b, s, hkv, d, device="cuda", dtype=dt)
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # (b, h, s, d) for torch peers
    causal, window = c["causal"], c["window"]
    fns = {"fastattn": fa.forward_fn(q, k, v, causal, window)}
    gqa = h != hkv
    if gqa:  # cuDNN takes no enable_gqa: every SDPA peer gets K/V expanded to h_q heads (more bytes)
        kt, vt = (x.repeat_interleave(h // hkv, dim=1) for x in (kt, vt))
    if window == (-1, -1):
        for name, be in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION),
                         ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)):
            def run(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            fns[name] = run
    if FLEX is not None and (d == 128 or window != (-1, -1)):
        if causal and window == (-1, -1):
            bm = create_block_mask(causal_mod, None, None, s, s, device="cuda")
        elif window != (-1, -1):
            bm = create_block_mask(window_mod(window[0]), None, None, s, s, device="cuda")
        else:
            bm = None
        kf, vf = (x[:, ::h // hkv] for x in (kt, vt)) if gqa else (kt, vt)
        fns["flex"] = lambda: FLEX(qt, kf, vf, block_mask=bm, enable_gqa=gqa)
    return fns, (q, k, v, qt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build/src/libfastattn.so")
    ap.add_argument("--preset", choices=["quick", "full"], default="full")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fa = FastAttn(args.lib)
    dev = torch.cuda.get_device_name()
    rows = []
    broken = None
    for c in cases(args.preset):
        if broken:
            break
        fns, (q, _, _, _) = peers_for(c, fa)
        pairs = kept_pairs(c["s"], c["s"], c["causal"], c["window"])
        flops = 4.0 * c["b"] * c["h"] * c["d"] * pairs
        results = {}
        ours = None
        for peer, fn in fns.items():
            if broken:
                break
            t0 = time.time()
            try:
                o = fn()
                torch.cuda.synchronize()
                if peer == "fastattn":
                    ours = o.float()
                elif ours is not None and o is not None:  # every peer's output against ours
                    diff = (ours - o.transpose(1, 2).float()).abs().max().item()
                    results.setdefault("_maxdiff", {})[peer] = diff
                ms = time_ms(fn)
                results[peer] = dict(ms=ms, tflops=flops / ms / 1e9)
            except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
                results[peer] = dict(error=str(e).splitlines()[0][:160])
                if "CUDA error" in str(e):  # sticky: the context is gone, later timings would lie
                    broken = f"{c['name']} / {peer}: {results[peer]['error']}"
            print(f"{c['name']:34s} {peer:15s} " + (f"{results[peer]['ms']:8.3f} ms {results[peer]['tflops']:6.1f} TFLOPS"
                  if "ms" in results[peer] else results[peer]["error"]) + f"  ({time.time() - t0:.1f}s)", flush=True)
        rows.append(dict(case=c["name"], flops=flops, results=results))
        del fns
        if not broken:
            torch.cuda.empty_cache()
    if broken:
        print(f"stopped early, CUDA context lost at {broken}", flush=True)
    meta = dict(device=dev, date=time.strftime("%Y-%m-%d %H:%M:%S"), torch=torch.__version__,
                commit=os.environ.get("FASTATTN_COMMIT") or os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip(),
                stopped_early=broken, flops_rule="4*b*h_q*d*kept_pairs (dense: s_q*s_k; causal: s(s+1)/2)", timing="median of 30 CUDA-event timings after 5 warm-ups")
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    peers = ["fastattn", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "flex"]
    lines = [f"# Forward, fastattn vs peers ({dev}, {meta['date']}, commit {meta['commit']})", "",
             "TFLOPS (ms); ratio = fastattn / sdpa-cudnn; maxdiff = max |fastattn - peer| of out, per peer", "",
             "| case | " + " | ".join(peers) + " | ratio | maxdiff |", "|---" * (len(peers) + 3) + "|"]
    for r in rows:
        cells = []
        for p in peers:
            x = r["results"].get(p)
            wrong = r["results"].get("_maxdiff", {}).get(p, 0) > 0.1  # disagrees with ours and cuDNN
            cells.append("-" if x is None else ("wrong output" if wrong else
                         f"{x['tflops']:.0f} ({x['ms']:.3f})" if "ms" in x else "err"))
        ours, cud = r["results"].get("fastattn", {}), r["results"].get("sdpa-cudnn", {})
        ratio = f"{cud['ms'] / ours['ms']:.2f}" if "ms" in ours and "ms" in cud else "-"
        md = r["results"].get("_maxdiff", {})
        diffs = " ".join(f"{p.replace('sdpa-', '')}:{v:.1e}" for p, v in md.items())
        lines.append(f"| {r['case']} | " + " | ".join(cells) + f" | {ratio} | {diffs} |")
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
