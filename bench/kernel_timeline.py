#!/usr/bin/env python3
"""Per-kernel timeline of graph-replayed calls, grouped by named range: what each kernel of a call
costs and how long the GPU waits before it.

Input: a chrome trace written by `bench/decode.py --timeline CASES --trace FILE` (torch profiler,
CUPTI kernel records of every graph node; one user range per case), or an nsys sqlite export
(`nsys profile --cuda-graph-trace=node ... decode.py --timeline CASES`, one NVTX range per case).
For each range the kernels that start inside it are sorted by start; per kernel name: count, grid,
median duration, the median gap from the end of the kernel before it to its start (negative: it
started before that one ended, as a programmatic dependent launch does) and from that end to its
own end (what it adds to the call); and the span of the last replay (the range's last `--calls`
calls) per call.

Usage: python3 bench/kernel_timeline.py trace.json|trace.sqlite [--calls 20]
"""
import argparse
import json
import statistics


def short(name):
    """A kernel's name without its template arguments, namespaces and return type."""
    base = name.replace("(anonymous namespace)", "").split("(")[0]
    depth, out = 0, ""
    for ch in base:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out += ch
    out = out.split("::")[-1].strip()
    return out.removeprefix("void ").strip() or base[:60]


def from_chrome(path):
    """(ranges, kernels) in us from a torch profiler chrome trace."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ranges, kernels = [], []
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "user_annotation":
            ranges.append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif e.get("cat") == "kernel":
            g = e.get("args", {}).get("grid", [0, 1, 1])
            kernels.append((e["ts"], e["ts"] + e["dur"], e["name"], g[0] * g[1] * g[2]))
    return sorted(ranges), sorted(kernels)


def from_nsys(path):
    """(ranges, kernels) in us from an nsys sqlite export."""
    import sqlite3
    db = sqlite3.connect(path)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
    text = "COALESCE(text, textId)" if "textId" in cols else "text"
    ranges = [(s / 1e3, e / 1e3, str(strings.get(t, t) if isinstance(t, int) else t))
              for s, e, t in db.execute(f"SELECT start, end, {text} FROM NVTX_EVENTS WHERE end IS NOT NULL ORDER BY start")]
    kernels = [(s / 1e3, e / 1e3, strings.get(n, str(n)), gx * gy * gz)
               for s, e, n, gx, gy, gz in db.execute(
                   "SELECT start, end, demangledName, gridX, gridY, gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")]
    return ranges, kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="chrome trace (.json) or nsys sqlite export")
    ap.add_argument("--calls", type=int, default=20, help="calls per graph (decode.py --calls)")
    args = ap.parse_args()
    ranges, kernels = (from_nsys if args.trace.endswith(".sqlite") else from_chrome)(args.trace)
    for r0, r1, name in ranges:
        ks = [k for k in kernels if r0 <= k[0] <= r1]
        if not ks:
            continue
        per = {}
        prev_end = None
        for s, e, n, grid in ks:
            d = per.setdefault(short(n), {"dur": [], "gap": [], "tail": [], "grid": grid})
            d["dur"].append(e - s)
            if prev_end is not None:
                d["gap"].append(s - prev_end)
                d["tail"].append(e - prev_end)
            prev_end = e
        # A call's kernels: the names launched at least once per call (not the range's set-up
        # kernels); the span of the last replay, its last `calls` of each.
        call_names = {k for k, d in per.items() if len(d["dur"]) >= args.calls}
        tail = [k for k in ks if short(k[2]) in call_names][-args.calls * len(call_names):]
        span = (tail[-1][1] - tail[0][0]) / args.calls if tail else 0.0
        print(f"== {name}: {len(ks)} kernels; the last replay: {span:.2f} us per call")
        med = lambda xs: f"{statistics.median(xs):7.2f}" if xs else "      -"
        for k, d in per.items():
            print(f"   {k[:40]:40s} n {len(d['dur']):4d} grid {d['grid']:5d} | dur med {med(d['dur'])} min "
                  f"{min(d['dur']):7.2f} | start - prev end {med(d['gap'])} | end - prev end {med(d['tail'])} us")


if __name__ == "__main__":
    main()
