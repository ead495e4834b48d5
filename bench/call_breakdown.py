#!/usr/bin/env python3
"""Where a small flash_attn_func call's host time goes (issue #30's per-call target): each layer of the torch
inference path timed alone: loops of --calls calls, every layer once per round, the median of 7 rounds (the
kernels take microseconds, so a loop without a sync measures host work). bf16 b1 s128 h16/4 d128 causal on CUDA (as bench/call_overhead.py), or float32
b1 s1 h1 d64 on the CPU backend (--device cpu).

    python bench/call_breakdown.py [--device cuda|cpu] [--calls 5000]
"""
import argparse
import statistics
import time

import torch

import fastattn
from fastattn import _C, _core, _fa_compat, _torch_views, interface


def interleaved_us(tests, calls, rounds=7):
    """tests: [(name, fn)]. Per round one loop of `calls` calls of each test, in turn; the median per test of
    its rounds' time a call, in us. Interleaved because this host's speed drifts between loops by up to 2 x
    (bench/results/2026-11-29-s52.md): a sequential table compares different moments."""
    for _, fn in tests:
        for _ in range(200):
            fn()
    times = {name: [] for name, _ in tests}
    for _ in range(rounds):
        for name, fn in tests:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return [(name, statistics.median(t)) for name, t in times.items()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--calls", type=int, default=5000)
    args = ap.parse_args()
    dev = args.device
    dt, (b, s, h, h_kv, d) = ((torch.bfloat16, (1, 128, 16, 4, 128)) if dev == "cuda"
                              else (torch.float32, (1, 1, 1, 1, 64)))
    q = torch.randn(b, s, h, d, device=dev, dtype=dt)
    k = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    v = torch.randn(b, s, h_kv, d, device=dev, dtype=dt)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    out = torch.empty_like(q)
    views = [_torch_views.view(x) for x in (q, k, v)] + [_torch_views._out_view(out, views_dtype(q), dev_of(q)), None]
    stream = torch.cuda.current_stream().cuda_stream if dev == "cuda" else 0
    scale = d ** -0.5
    with torch.no_grad():
        tests = [
            ("sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)),
            ("flash_attn_func", lambda: fastattn.flash_attn_func(q, k, v, causal=True)),
            ("attention()", lambda: interface.attention(q, k, v, causal=True, with_lse=False)),
            ("_torch_views.forward", lambda: _torch_views.forward(q, k, v, _core.NO_INDEX, 0, 0, scale, True, -1, 0, 0.0,
                                                                  dev == "cpu", False)),
            ("_C.forward_views (ready views)", lambda: _C.forward_views(*views, None, None, None, None, 0, 0, scale, True,
                                                                       -1, 0, 0.0, False, 0, 0, stream)),
            ("q.new_empty (out)", lambda: q.new_empty((b, s, h, d))),
            ("torch.empty_like(q)", lambda: torch.empty_like(q)),
            ("view(q)", lambda: _torch_views.view(q)),
            ("_fa_compat.check()", lambda: _fa_compat.check()),
            ("_torch_path", lambda: interface._torch_path(torch, q, k, v)),
            ("torch.compiler.is_compiling", lambda: torch.compiler.is_compiling()),
            ("torch.is_grad_enabled", lambda: torch.is_grad_enabled()),
            ("q.get_device()", lambda: q.get_device()),
        ]
        if dev == "cuda":
            tests += [("_current_device()", lambda: _torch_views._current_device()),
                      ("_raw_stream(0)", lambda: _torch_views._raw_stream(0))]
        rows = interleaved_us(tests, args.calls)
    print(f"# host us / call ({torch.cuda.get_device_name() if dev == 'cuda' else 'CPU backend'}, torch {torch.__version__})")
    print("| layer | us |\n|---|---:|")
    for name, us in rows:
        print(f"| {name} | {us:.2f} |")


def views_dtype(t):
    return _torch_views._DTYPES[t.dtype]


def dev_of(t):
    return t.get_device() if t.is_cuda else -1


if __name__ == "__main__":
    main()
