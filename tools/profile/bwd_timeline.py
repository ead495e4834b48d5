#!/usr/bin/env python3
"""Per-kernel timeline of the backward (torch profiler, CUPTI kernel and memset records): for each
library (ours, one or more builds) and FA3's backward peer, per dense bf16 shape, the kernels of one
call with their median duration, and the call's span on the GPU (first kernel start to last kernel
end over N back-to-back calls, divided by N; span less the kernels' sum = launch gaps). Inputs come
from the first library's forward, as bench/run-peers.py feeds FA3.

    bwd_timeline.py --lib base=BUILD_A/libfastattn.so --lib new=BUILD_B/libfastattn.so \
        [--fa3-lib libfa3peer.so] [--shape "16 1024 32 64"] [--shape "16 1024 16 128 causal"]
"""
import argparse
import collections
import importlib.util
import json
import os
import statistics
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

ap = argparse.ArgumentParser()
ap.add_argument("--lib", action="append", required=True, help="NAME=path of a libfastattn.so")
ap.add_argument("--fa3-lib")
ap.add_argument("--shape", action="append", help='"B S H D [causal]" (default: the s1k and d64 s4k rows)')
ap.add_argument("--calls", type=int, default=10)
a = ap.parse_args()
shapes = a.shape or ["16 1024 32 64", "16 1024 16 128 causal", "16 1024 16 128", "4 4096 32 64"]

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("run_peers", os.path.join(here, "..", "..", "bench", "run-peers.py"))
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)
libs = [(name, peers.FastAttn(path)) for name, path in (x.split("=", 1) for x in a.lib)]
fa3 = peers.Fa3(a.fa3_lib) if a.fa3_lib else None


def short(name):
    """A kernel's name without return type, namespaces and template arguments."""
    return name.split("(")[0].split("<")[0].split("::")[-1].removeprefix("void ").strip() or name[:40]


def timeline(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.calls):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    ev = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")), key=lambda e: e["ts"])
    per = collections.defaultdict(list)
    for e in ev:
        per[short(e["name"]) if e["cat"] == "kernel" else e["cat"]].append(e["dur"])
    span = (ev[-1]["ts"] + ev[-1]["dur"] - ev[0]["ts"]) / a.calls
    busy = sum(e["dur"] for e in ev) / a.calls
    parts = " + ".join(f"{n} {statistics.median(d):.1f}" for n, d in per.items())
    return f"span {span:.1f} us (gaps {span - busy:.1f}) = {parts}"


for shape in shapes:
    b, s, h, d, *mask = shape.split()
    b, s, h, d, causal = int(b), int(s), int(h), int(d), mask == ["causal"]
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    fwd = libs[0][1].forward_fn(torch, q, k, v, causal, (-1, -1))
    out = fwd()
    label = f"b{b} s{s} h{h} d{d} {'causal' if causal else 'full'}"
    for name, lib in libs:
        print(f"{label} {name}: {timeline(lib.backward_fn(torch, q, k, v, out, fwd.lse, dout, causal, (-1, -1)))}")
    if fa3 is not None:
        print(f"{label} fa3: {timeline(fa3.backward_fn(torch, q, k, v, out, fwd.lse, dout, causal, (-1, -1)))}")
