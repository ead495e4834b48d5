#!/usr/bin/env python3
"""Runs FlashAttention-3's backward (bench/fa3's libfa3peer.so, through bench/run-peers.py's glue)
a few times on one dense shape, for a profiler to catch one launch (scripts/bwd-ncu). Inputs come
from fastattn's forward (libfastattn.so), as run-peers feeds FA3.

    fa3_bwd_once.py --lib LIBFASTATTN --fa3-lib LIBFA3PEER --b 2 --s 8192 --h 16 --d 128 [--causal] [--calls 3]
"""
import argparse
import importlib.util
import os

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--fa3-lib", required=True)
for f in ("b", "s", "h", "d"):
    ap.add_argument(f"--{f}", type=int, required=True)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--calls", type=int, default=3)
a = ap.parse_args()

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("run_peers", os.path.join(here, "..", "..", "bench", "run-peers.py"))
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)

torch.manual_seed(0)
q, k, v, dout = (torch.randn(a.b, a.s, a.h, a.d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
ours = peers.FastAttn(a.lib)
fwd = ours.forward_fn(torch, q, k, v, a.causal, (-1, -1))
out = fwd()
bwd = peers.Fa3(a.fa3_lib).backward_fn(torch, q, k, v, out, fwd.lse, dout, a.causal, (-1, -1))
for _ in range(a.calls):
    bwd()
torch.cuda.synchronize()
print("fa3 backward ran", a.calls, "times")
