#!/usr/bin/env python3
"""A/B of fastattn builds on the biased forward or backward, in one process (session 41's device calls).

Each library given by --lib NAME=libfastattn.so is one side (the first is the base); the base's dense call runs
beside them. b 4, s 8192, h 32, bf16, bias (1, h, s, s). Each round calls every side once after a warming call,
between two CUDA events, in an order reversed every other round; a side's time is the median over rounds, and
"x / base" is the median of its per-round times over the base's, with the rounds' min-max. The sides must agree
bitwise: the forward's out, the backward's dk and dv (dq and dbias add by atomics).
    python3 bench/bias_ab.py --lib base=A/libfastattn.so --lib new=B/libfastattn.so [--mode fwd|bwd]
        [--d 128,64] [--rounds 9] [--bias-dtypes bfloat16,float32] (bwd: d 128; with and without dbias)
TFLOPS are not printed: the rows compare builds, not peers (bench/bias_bench.py times the peers).
"""
import argparse
import ctypes
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", action="append", required=True, help="NAME=path of a libfastattn.so; the first is the base")
    ap.add_argument("--mode", choices=("fwd", "bwd"), default="fwd")
    ap.add_argument("--d", default="128,64", help="head dims (forward)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--bias-dtypes", default="bfloat16,float32", help="the backward's bias dtypes")
    args = ap.parse_args(argv)
    libs = [x.split("=", 1) for x in args.lib]
    if any(len(x) != 2 or not x[0] or not x[1] for x in libs):
        ap.error("--lib takes NAME=path")
    for n, p in libs:
        if not os.path.isfile(p):
            ap.error(f"--lib {n}: no file {p}")
    if len({n for n, _ in libs}) != len(libs) or any(n == "dense" for n, _ in libs):
        ap.error("--lib names must differ and not be 'dense'")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    try:
        args.dims = [int(x) for x in args.d.split(",")]
    except ValueError:
        ap.error("--d takes head dims like 128,64")
    args.libs = libs
    return args


def timed_rounds(torch, fns, rounds):
    """{name: [ms per round]}: one warming call and one timed call a side a round, order reversed every other."""
    names = list(fns)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            fns[n]()
            e0.record()
            fns[n]()
            e1.record()
            e1.synchronize()
            times[n].append(e0.elapsed_time(e1))
    return times


def ratio_cells(times, sides):
    base = sides[0]
    cells = []
    for n in sides[1:]:
        rs = sorted(a / b for a, b in zip(times[n], times[base]))
        cells.append(f"{statistics.median(rs):.3f} ({rs[0]:.3f}-{rs[-1]:.3f})")
    return cells


def call(fa, fn_name, *refs):
    if getattr(fa.lib, fn_name)(*refs) != 0:
        raise RuntimeError(fa.lib.fastattn_last_error().decode())


def main(argv=None):
    args = parse_args(argv)
    import torch
    sys.path.insert(0, HERE)
    from bias_bench import bias_args, load_peers_module  # bias_bench's C ABI arguments; run-peers.py's structs
    rp = load_peers_module()
    libs = {n: rp.FastAttn(p) for n, p in args.libs}
    sides = list(libs)
    base = sides[0]
    b, s, h = 4, args.s, 32
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    torch.manual_seed(0)

    def sides_made(make):
        """The base's dense call and every side's biased one, each run once (so that their results exist)."""
        fns = {"dense": make(libs[base], False)}
        fns.update({n: make(libs[n], True) for n in sides})
        for n in sides:
            fns[n]()
        torch.cuda.synchronize()
        return fns

    head = "| " + " | ".join(f"{n} ms" for n in sides) + " | " + " | ".join(f"{n} / {base}" for n in sides[1:])
    print(f"{args.mode}: b{b} s{s} h{h} bf16, bias (1, h, s, s), {args.rounds} rounds, medians "
          f"(x / {base}: median of per-round ratios, min-max)\n")
    if args.mode == "fwd":
        bias = (torch.randn(1, h, s, s, device="cuda", dtype=torch.bfloat16) * 2).contiguous()
        print("| d | causal | dense ms " + head + " | equal |")
        print("|---|---|---:|" + "---:|" * (2 * len(sides) - 1) + "---|")
        for d in args.dims:
            q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            for causal in (False, True):
                def make(fa, with_bias):
                    out = torch.full_like(q, float("nan"))  # poisoned: a side that writes nothing cannot agree
                    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
                    a = bias_args(rp, fa, q, k, v, out, lse, bias if with_bias else None, causal)

                    def run():
                        call(fa, "fastattn_forward", ctypes.byref(a), stream)
                    run.keep, run.out = (a, lse), out
                    return run
                fns = sides_made(make)
                same = all(torch.equal(fns[base].out, fns[n].out) for n in sides)
                t = timed_rounds(torch, fns, args.rounds)
                m = {n: statistics.median(t[n]) for n in fns}
                print(f"| {d} | {int(causal)} | {m['dense']:.3f} | " + " | ".join(f"{m[n]:.3f}" for n in sides) + " | " +
                      " | ".join(ratio_cells(t, sides)) + f" | {'bitwise' if same else 'DIFFER'} |", flush=True)
            del q, k, v
        return
    d = 128
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    print("| bias | dbias | causal | dense ms " + head + " | dk, dv equal |")
    print("|---|---|---|---:|" + "---:|" * (2 * len(sides) - 1) + "---|")
    for name in args.bias_dtypes.split(","):
        bias = (torch.randn(1, h, s, s, device="cuda", dtype=getattr(torch, name)) * 2).contiguous()
        bias16 = bias.to(torch.bfloat16)  # the CUDA forward reads a bias of q's dtype: its out / lse come from this
        dbias = torch.empty(1, h, s, s, device="cuda", dtype=torch.float32)
        for with_dbias in (False, True):
            for causal in (False, True):
                def make(fa, with_bias):
                    out = torch.empty_like(q)
                    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
                    a = bias_args(rp, fa, q, k, v, out, lse, bias16 if with_bias else None, causal)
                    call(fa, "fastattn_forward", ctypes.byref(a), stream)
                    if with_bias:
                        a.bias = fa._tensor(bias)
                        if with_dbias:
                            a.dbias = fa._tensor(dbias)
                    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
                    views = [fa._tensor(t) for t in [dout] + grads]
                    refs = [ctypes.byref(a)] + [ctypes.byref(x) for x in views]

                    def run():
                        call(fa, "fastattn_backward", *refs, stream)
                    run.keep, run.grads = (out, lse, a, views), grads
                    return run
                fns = sides_made(make)
                same = all(torch.equal(x, y) for n in sides for x, y in zip(fns[base].grads[1:], fns[n].grads[1:]))
                t = timed_rounds(torch, fns, args.rounds)
                m = {n: statistics.median(t[n]) for n in fns}
                print(f"| {name} | {int(with_dbias)} | {int(causal)} | {m['dense']:.3f} | " +
                      " | ".join(f"{m[n]:.3f}" for n in sides) + " | " + " | ".join(ratio_cells(t, sides)) +
                      f" | {'bitwise' if same else 'DIFFER'} |", flush=True)
                del fns
        del bias, bias16, dbias


if __name__ == "__main__":
    main()
