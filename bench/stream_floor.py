#!/usr/bin/env python3
"""What one kernel that only moves a decode call's bytes costs per call in CUDA-graph replays.

Issue #30's decode target is 1.3 x the HBM floor (K/V bytes / copy bandwidth). At batch 1 and
s_k 4k that floor is ~5.6 us, which is close to the fixed cost of any kernel (launch inside the
graph, the first DRAM round trip, the grid's drain). This measures that fixed cost directly: for
the same bytes as the decode call's K/V, per call in graphs of 20 calls (the way bench/decode.py
times our kernel), median of rounds:
  empty   : a one-element add (launch and drain only)
  copy    : a device-to-device copy of half the bytes (read + written = the K/V bytes, the floor's
            definition of moved bytes)
  add     : an elementwise kernel over half the bytes (out = in + 0: the same bytes, on the SMs)
  sum     : a read-only reduction over all the bytes (torch's sum)
The calls of a graph rotate over copies of the buffers (>= 200 MiB in all, at most 8 copies), as
bench/decode.py's do, so that each call reads from HBM and not from the 50 MB L2.
Our kernel's own numbers on the same shapes: bench/decode.py (same graph method).

usage: stream_floor.py [--sk 4096,8192,16384,32768] [--batch 1] [--hkv 8] [--d 128] [--rounds 5]
"""
import argparse
import statistics

import torch


def capture(fn, calls):
    """A CUDA graph of fn(0) .. fn(calls - 1), after three warm-up calls on the capture's side stream."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    return g


def replay_us(g, calls, replays):
    """us per call of `replays` replays of graph g (of `calls` calls), between two CUDA events."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / (replays * calls)


def per_call_us(fn, calls=20, replays=50, rounds=5):
    """fn(i): the graph's call i."""
    g = capture(fn, calls)
    return statistics.median(replay_us(g, calls, replays) for _ in range(rounds))


def paired_us(fns, calls=20, replays=50, rounds=15):
    """Sides timed in turn, the order rotated each round (ab-pairs' method for graphs): per side its median
    us per call, and per side > 0 the median of its per-round ratio to side 0 with the 25-75 % range."""
    graphs = [capture(fn, calls) for fn in fns]
    times = [[] for _ in fns]
    for r in range(rounds):
        for k in range(len(fns)):
            j = (r + k) % len(fns)
            times[j].append(replay_us(graphs[j], calls, replays))
    med = [statistics.median(t) for t in times]
    ratios = []
    for t in times[1:]:
        q = sorted(x / y for x, y in zip(t, times[0]))
        ratios.append((statistics.median(q), q[len(q) // 4], q[(3 * len(q)) // 4]))
    return med, ratios


def copy_bandwidth():
    """Bytes read + written per second of a 1 GiB copy, best of 6 eager calls: the HBM floor's rate (bench/decode.py too)."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    best = 1e9
    for _ in range(6):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return 2 * x.numel() / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sk", default="4096,8192,16384,32768")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    bw = copy_bandwidth()
    print(f"# {torch.cuda.get_device_name()}, copy bandwidth {bw / 1e12:.2f} TB/s (1 GiB copy, read + written, as bench/decode.py)")
    one = torch.zeros(1, device="cuda")
    empty = per_call_us(lambda i: one.add_(1), rounds=a.rounds)
    print(f"# empty kernel (one-element add): {empty:.2f} us a call")
    print("| s_k | K/V MB | floor us | copy us (x floor) | add us (x floor) | sum us (x floor) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for sk in (int(x) for x in a.sk.split(",")):
        nbytes = 2 * a.batch * sk * a.hkv * a.d * 2  # K and V, bf16
        floor = nbytes / bw * 1e6
        n = max(1, min(8, -(-(200 << 20) // nbytes)))
        half = [torch.randn(nbytes // 4, dtype=torch.bfloat16, device="cuda") for _ in range(n)]
        dst = [torch.empty_like(half[0]) for _ in range(n)]
        whole = [torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda") for _ in range(n)]
        acc = torch.empty((), dtype=torch.float32, device="cuda")
        t_copy = per_call_us(lambda i: dst[i % n].copy_(half[i % n]), rounds=a.rounds)
        t_add = per_call_us(lambda i: torch.add(half[i % n], 0, out=dst[i % n]), rounds=a.rounds)
        t_sum = per_call_us(lambda i: torch.sum(whole[i % n], dim=0, dtype=torch.float32, out=acc), rounds=a.rounds)
        del half, dst, whole
        print(f"| {sk} | {nbytes / 1e6:.1f} | {floor:.1f} | {t_copy:.1f} ({t_copy / floor:.2f}) | "
              f"{t_add:.1f} ({t_add / floor:.2f}) | {t_sum:.1f} ({t_sum / floor:.2f}) |")


if __name__ == "__main__":
    main()
