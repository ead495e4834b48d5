#!/usr/bin/env python3
"""Per-kernel timeline of an nsys trace, grouped by NVTX range: what each kernel of a graph-replayed
call costs and how long the GPU waits before it.

For each NVTX range (bench/decode.py --timeline names one per case) the kernels that start inside
it are sorted by start; per kernel name: count, grid, median duration, the median gap from the
end of the kernel before it to its start (negative: it started before that one ended, as a
programmatic dependent launch does) and from that end to its own end (what it adds to the call); and the span of the last replay (the range's last `--calls`
calls) per call.

Usage: nsys profile --cuda-graph-trace=node -o trace python3 bench/decode.py --timeline ...
       nsys export --type sqlite -o trace.sqlite trace.nsys-rep
       python3 bench/nsys_kernels.py trace.sqlite [--calls 20]
"""
import argparse
import sqlite3
import statistics


def short(name):
    """A kernel's name without its template arguments and namespaces."""
    base = name.split("(")[0]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sqlite")
    ap.add_argument("--calls", type=int, default=20, help="calls per graph (decode.py --calls)")
    args = ap.parse_args()
    db = sqlite3.connect(args.sqlite)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
    text = "COALESCE(text, '')" if "textId" not in cols else "COALESCE(text, textId)"
    ranges = []
    for start, end, t in db.execute(f"SELECT start, end, {text} FROM NVTX_EVENTS WHERE end IS NOT NULL ORDER BY start"):
        name = strings.get(t, t) if isinstance(t, int) else t
        ranges.append((start, end, str(name)))
    kernels = [(s, e, strings.get(n, str(n)), gx * gy * gz)
               for s, e, n, gx, gy, gz in db.execute(
                   "SELECT start, end, demangledName, gridX, gridY, gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")]
    for r0, r1, name in ranges:
        ks = [k for k in kernels if r0 <= k[0] <= r1]
        if not ks:
            continue
        per = {}
        prev_end = None
        for s, e, n, grid in ks:
            d = per.setdefault(short(n), {"dur": [], "gap": [], "tail": [], "grid": grid})
            d["dur"].append((e - s) / 1e3)
            if prev_end is not None:
                d["gap"].append((s - prev_end) / 1e3)
                d["tail"].append((e - prev_end) / 1e3)
            prev_end = e
        # Kernels a call: its distinct names (a call launches each once); the span of the last replay.
        tail = ks[-args.calls * len(per):]  # the last replay
        span = (tail[-1][1] - tail[0][0]) / 1e3 / (len(tail) / len(per))
        print(f"== {name}: {len(ks)} kernels, the last {len(tail)}: {span:.2f} us per call")
        for k, d in per.items():
            med = lambda xs: f"{statistics.median(xs):7.2f}" if xs else "      -"
            print(f"   {k[:40]:40s} n {len(d['dur']):4d} grid {d['grid']:5d} | dur med {med(d['dur'])} min "
                  f"{min(d['dur']):7.2f} | start - prev end {med(d['gap'])} | end - prev end {med(d['tail'])} us")


if __name__ == "__main__":
    main()
