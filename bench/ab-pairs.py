#!/usr/bin/env python3
"""Backward A/B of fastattn builds (and FA3) call by call: the sides' calls interleaved, so that every
pair of calls shares one power state.

Why: on the lent H100s (700 W cap) the SM clock drifts by up to 30 % over seconds
(docs/notes/bench-power.md); kernels timed in bursts of their own (bench/ab.sh, one process per side;
or rounds of 10 calls per side in one process) came out up to 3-4 % apart with identical code
(docs/notes/bwd-sm90.md, sessions 28-29). Here one iteration calls every side once, in an order
rotated per iteration, each call between two CUDA events on one stream (the host queues ahead: no
launch gap inside a call); a side's ratio is taken per iteration against the first side's call of
the same iteration, then summarized. Drift slower than one iteration (a few ms) cancels in the ratio.

usage: ab-pairs.py --lib NAME=LIBFASTATTN.so[@det] [--lib ...] [--fa3-lib libfa3peer.so]
                   [--shape b,s,h,d[/dv],MODE ...] [--iters N] [--deterministic] [--forward]
  h: query heads, or H/HKV for GQA / MQA (HKV key / value heads, dividing H). d: q's and k's head
  dim, or D/DV where v, out and dout have head dim DV (2,4096,16,192/128,causal: DeepSeek's shape).
  A library named with @det runs its backward in deterministic mode (beside the same library's
  default mode, say; its side is printed as NAME@det); --deterministic puts every side, FA3's too,
  in deterministic mode.
  --forward times the forward instead (FA3's side only where its library was built with the forward).
  MODE: causal | full | wL:R (window (L, R), -1: no edge). Prints one line per side and shape:
  median ms, TFLOPS at that median, ratio to the first side (median of per-iteration ratios, its
  25-75 % range) and the share of iterations in which the side was faster than the first. A side
  whose first call fails (no kernel for the shape) is printed as n/a with its error and left out of
  that shape; the first side that runs is then the base. The first library's forward makes the
  backward's out and lse: where it fails, the shape is skipped.
  FLOPs, as bench/run-peers.py counts them: forward 2*b*h*(d + dv)*pairs (QK^T at d, PV at dv), pairs
  the kept (query, key) pairs per head: s*s dense, s(s+1)/2 causal, a window's exact count (so
  4*b*h*s*s*d dense at dv = d); backward 2.5 x the forward's.
"""
import argparse
import importlib.util
import os
import statistics
import sys


def load_peers():
    spec = importlib.util.spec_from_file_location("run_peers", os.path.join(os.path.dirname(__file__), "run-peers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_shape(text):
    want = (f"--shape {text!r}: want b,s,h,d,MODE with positive sizes (h: H or H/HKV, HKV dividing H; d: D or "
            "D/DV) and MODE causal, full or wL:R (a window; -1: no edge)")
    f = text.split(",")
    if len(f) != 5:
        raise SystemExit(want)
    try:
        b, s = int(f[0]), int(f[1])
        h, sep, hkv = f[2].partition("/")
        h = int(h)
        hkv = int(hkv) if sep else h
        d, sep, dv = f[3].partition("/")
        d = int(d)
        dv = int(dv) if sep else d
        mode = f[4]
        if mode in ("causal", "full"):
            window = (-1, -1)
        elif mode.startswith("w") and mode.count(":") == 1:
            window = tuple(int(x) for x in mode[1:].split(":"))
        else:
            raise ValueError(mode)
    except ValueError:
        raise SystemExit(want) from None
    if min(b, s, h, hkv, d, dv) < 1 or min(window) < -1 or h % hkv:
        raise SystemExit(want)
    return b, s, h, hkv, d, dv, mode == "causal", window, mode


def shape_flops(peers, b, s, h, d, dv, causal, window, forward):
    """FLOPs of one call, by run-peers' rule (case_flops, bwd_flops)."""
    case = dict(b=b, s=s, h=h, d=d, dv=dv, causal=causal, window=list(window))
    return peers.case_flops(case) if forward else peers.bwd_flops(case)


def parse_lib(spec):
    """--lib NAME=PATH[@det] -> (name, path, deterministic); the file must exist."""
    name, sep, path = spec.partition("=")
    det = path.endswith("@det")
    path = path[:-4] if det else path
    if not sep or not name or not os.path.isfile(path):
        raise SystemExit(f"--lib {spec!r}: want NAME=existing .so (or NAME=existing .so@det)")
    return name, path, det


def quantile(xs, q):
    xs = sorted(xs)
    at = q * (len(xs) - 1)
    lo = int(at)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (at - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", action="append", required=True, help="NAME=path of a libfastattn.so, @det after it: deterministic mode (first: the base)")
    ap.add_argument("--fa3-lib", help="FA3's peer library (bench/fa3): an extra side 'fa3' (its backward; with --forward its forward)")
    ap.add_argument("--shape", action="append", help="b,s,h,d[/dv],MODE (default: 2,8192,16,128,causal)")
    ap.add_argument("--iters", type=int, default=60, help="iterations (each calls every side once)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--forward", action="store_true",
                    help="time the forward instead (FA3's side where --fa3-lib has fa3_forward: FA3_PARTS=fwd or all)")
    args = ap.parse_args()
    if args.iters < 3:
        raise SystemExit("--iters: at least 3")
    if args.forward and (args.deterministic or any(parse_lib(spec)[2] for spec in args.lib)):
        raise SystemExit("--forward: deterministic mode is the backward's")
    import torch
    peers = load_peers()
    sides = []
    for spec in args.lib:
        name, path, det = parse_lib(spec)
        sides.append((name + ("@det" if det else ""), peers.FastAttn(path), det))
    fa3 = peers.Fa3(args.fa3_lib) if args.fa3_lib else None
    if fa3 is not None and not (fa3.has_forward if args.forward else fa3.has_backward):
        print(f"# {args.fa3_lib}: no FA3 {'forward' if args.forward else 'backward'} in it (FA3_PARTS): no fa3 side",
              flush=True)
        fa3 = None
    stream = torch.cuda.current_stream()
    for text in args.shape or ["2,8192,16,128,causal"]:
        b, s, h, hkv, d, dv, causal, window, mode = parse_shape(text)
        torch.manual_seed(0)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hkv, dv, device="cuda", dtype=torch.bfloat16)
        dout = torch.randn(b, s, h, dv, device="cuda", dtype=torch.bfloat16)
        try:
            fwd = sides[0][1].forward_fn(torch, q, k, v, causal, window)
            out = fwd()
        except RuntimeError as e:
            print(f"# {text}: {sides[0][0]} forward failed ({e}): shape skipped", flush=True)
            continue
        if args.forward:
            fns = [(n, lib.forward_fn(torch, q, k, v, causal, window)) for n, lib, _ in sides]
        else:
            fns = [(n, lib.backward_fn(torch, q, k, v, out, fwd.lse, dout, causal, window, det or args.deterministic))
                   for n, lib, det in sides]
        if fa3 is not None and args.forward:
            fns.append(("fa3", fa3.forward_fn(torch, q, k, v, causal, window)))
        elif fa3 is not None:
            fns.append(("fa3", fa3.backward_fn(torch, q, k, v, out, fwd.lse, dout, causal, window, args.deterministic)))
        runs = []  # the sides whose first call ran, the first one's result the reference
        for n, fn in fns:
            try:
                got = fn()
            except RuntimeError as e:
                print(f"# {text}: {n} n/a: {e}", flush=True)
                continue
            if runs:
                if args.forward:  # out (a tensor), the forward's lse beside it on the runner
                    diff, what = (got.float() - ref.float()).abs().max().item(), "out"
                else:
                    diff, what = (max((g.float() - r.float()).abs().max().item() for g, r in zip(got[:3], ref[:3])),
                                  "dq, dk, dv")
                print(f"# {text}: {n} vs {runs[0][0]} max |d| over {what} {diff:.3e}", flush=True)
            else:
                ref = got
            runs.append((n, fn))
        if not runs:
            print(f"# {text}: no side ran: shape skipped", flush=True)
            continue
        fns = runs
        for _ in range(args.warmup):
            for _, fn in fns:
                fn()
        n_sides = len(fns)
        events = [[None] * n_sides for _ in range(args.iters)]
        for it in range(args.iters):
            for j in range(n_sides):
                i = (j + it) % n_sides
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record(stream)
                fns[i][1]()
                end.record(stream)
                events[it][i] = (start, end)
        torch.cuda.synchronize()
        ms = [[events[it][i][0].elapsed_time(events[it][i][1]) for i in range(n_sides)] for it in range(args.iters)]
        label = (f"b{b} s{s} h{h}{'/' + str(hkv) if hkv != h else ''} d{d}{'/' + str(dv) if dv != d else ''} {mode}"
                 f"{' det' if args.deterministic else ''}{' fwd' if args.forward else ''}")
        flops = shape_flops(peers, b, s, h, d, dv, causal, window, args.forward)
        for i, (n, _) in enumerate(fns):
            times = [row[i] for row in ms]
            ratios = [row[i] / row[0] for row in ms]
            faster = sum(r < 1.0 for r in ratios) / len(ratios)
            print(f"{label} | {n:8s} | {statistics.median(times):8.3f} ms (min {min(times):.3f}) "
                  f"{flops / statistics.median(times) / 1e9:6.1f} TFLOPS | "
                  f"/{fns[0][0]} {statistics.median(ratios):.4f} [{quantile(ratios, 0.25):.4f}, "
                  f"{quantile(ratios, 0.75):.4f}] | faster in {100 * faster:.0f} % of {len(ratios)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
