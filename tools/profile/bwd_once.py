#!/usr/bin/env python3
"""Runs one dense backward of ours and / or FA3's (bench/fa3's libfa3peer.so) on one shape, for a profiler
to catch their launches (tools/profile/ncu_preprocess.sh, scripts/bwd-ncu). Both sides get the same
tensors: q, k, v, dO drawn once, out / lse from our forward, through bench/run-peers.py's classes as
bench/ab-pairs.py drives them (its shape syntax too).

    bwd_once.py --lib LIBFASTATTN [--fa3-lib LIBFA3PEER] --shape 4,4096,16,64,causal \
                [--side ours] [--side fa3] [--warmup 2] [--calls 1] [--dtype bfloat16]

Order of the launches: --warmup calls of every side (in --side order), then --calls of every side; so a
profiler filtered to one kernel per side skips --warmup x sides of them and takes --calls x sides
(ncu --launch-skip / --launch-count). Without a GPU (no torch) it still parses and checks its arguments.
"""
import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libfastattn.so (its forward makes out / lse for both sides)")
    ap.add_argument("--fa3-lib", help="FA3's backward peer library (needed by --side fa3)")
    ap.add_argument("--shape", required=True, help="b,s,h,d[/dv],MODE as bench/ab-pairs.py (MODE causal | full | wL:R)")
    ap.add_argument("--side", action="append", choices=("ours", "fa3"), help="sides in launch order (default: ours, fa3)")
    ap.add_argument("--warmup", type=int, default=2, help="unprofiled calls of every side first")
    ap.add_argument("--calls", type=int, default=1, help="calls of every side after the warm-ups")
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    ap.add_argument("--dry-run", action="store_true", help="check the arguments, print the plan, run nothing")
    a = ap.parse_args(argv)
    a.side = a.side or ["ours", "fa3"]
    if "fa3" in a.side and not a.fa3_lib:
        ap.error("--side fa3 needs --fa3-lib")
    for path in (a.lib, a.fa3_lib):
        if path and not os.path.isfile(path):
            ap.error(f"no such library: {path}")
    if a.warmup < 0 or a.calls < 1:
        ap.error("--warmup >= 0 and --calls >= 1")
    a.problem = load("ab_pairs", os.path.join(BENCH, "ab-pairs.py")).parse_shape(a.shape)
    return a


def main(argv=None):
    a = parse_args(argv)
    b, s, h, hkv, d, dv, causal, window, _ = a.problem
    if a.dry_run:
        print(f"bwd_once {a.shape}: would run {a.warmup} warm-up + {a.calls} call(s) of {', '.join(a.side)} "
              f"(b {b} s {s} h {h}/{hkv} d {d}{'' if dv == d else f'/{dv}'} causal {causal} window {window} {a.dtype})")
        return 0
    import torch  # only here: the arguments above are checked on machines without a GPU

    peers = load("run_peers", os.path.join(BENCH, "run-peers.py"))
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(0)
    q, dout = (torch.randn(b, s, h, dd, device="cuda", dtype=dtype) for dd in (d, dv))
    k, v = (torch.randn(b, s, hkv, dd, device="cuda", dtype=dtype) for dd in (d, dv))
    ours = peers.FastAttn(a.lib)
    fwd = ours.forward_fn(torch, q, k, v, causal, window)
    out = fwd()
    libs = {"ours": ours, "fa3": peers.Fa3(a.fa3_lib) if "fa3" in a.side else None}
    fns = [(side, libs[side].backward_fn(torch, q, k, v, out, fwd.lse, dout, causal, window)) for side in a.side]
    for _ in range(a.warmup):
        for _, fn in fns:
            fn()
    torch.cuda.synchronize()
    for _ in range(a.calls):
        for _, fn in fns:
            fn()
    torch.cuda.synchronize()
    print(f"bwd_once {a.shape}: {a.warmup} warm-up + {a.calls} call(s) of {', '.join(a.side)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
