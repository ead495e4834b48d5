#!/usr/bin/env python3
"""A schedule model of the sm90 deterministic backward's dQ chain (docs/notes/masks-sm90.md,
"Deterministic bitmask backward: the chain under a causal triangle").

What it models: make_bwd_tile's deterministic CTA order (chunks of det_chunk key blocks per unit,
every unit's chunk before the next, from the top key block down), dispatched in item order onto
`sms` slots (one CTA an SM); each CTA walks its q-block list (kBwdWalkUp: positions rising). Per step
the consumers compute for `c` (one step = 1.0) into one of two staging buffers (free once the dQ
writer has added the step two before); the writer adds for `a` once the step is computed, its
previous add is done and the q-block's turn has come: the key tile above it that lists the q-block
(the turns run from the top key tile down) has added. A CTA takes `o` more for its prologue and
epilogue (K / V loads, dK / dV stores). Since a tile waits only on tiles of earlier items, each
CTA's timeline is final once it starts, so the items are simulated in order.

Lists (q-blocks of 64 rows, key tiles of 128 keys; M = 2 N):
  dense causal         tile j: 2j .. M-1
  bits-now (causal)    tile j: full 2j+2 .. M-1, then the partial diagonal 2j, 2j+1
                       (bit_list_part puts bit-partial blocks of the window's full range last)
  bits-fixed (causal)  tile j: 2j .. M-1 (bit_list_det_edges: partials below the first full one first)
  dense full           tile j: 0 .. M-1 (rand50 bits are this too: every block listed)

Usage: python3 tools/sched/det_dq_chain.py [--units 128] [--n 64] [--a 0.25] [--o 0.5]
Prints each scheme's makespan in steps and its ratio to the dense one of the same mask; with
--dense-ms the dense deterministic causal time measured, the others' predicted times.
"""
import argparse
import heapq


def lists(scheme, n, m):
    if scheme == "dense-causal" or scheme == "bits-fixed":
        return [list(range(2 * j, m)) for j in range(n)]
    if scheme == "bits-now":
        return [list(range(2 * j + 2, m)) + [2 * j, 2 * j + 1] for j in range(n)]
    if scheme == "dense-full":
        return [list(range(m)) for _ in range(n)]
    raise ValueError(scheme)


def item_tile(item, units, n, chunk):
    per_chunk = chunk * units
    slots = (n + chunk - 1) // chunk * chunk
    unit = item % per_chunk // chunk
    block = slots - 1 - (item // per_chunk * chunk + item % chunk)
    return unit, block


def simulate(scheme, units, n, chunk, sms, c=1.0, a=0.25, o=0.5):
    m = 2 * n
    walk = lists(scheme, n, m)
    # the key tile above j that lists q-block q (the turn before j's): the next higher tile listing q
    listed = [set(w) for w in walk]
    added = {}  # (unit, tile, q-block) -> time its add landed
    free = [0.0] * sms
    heapq.heapify(free)
    start = 0.0
    end_all = 0.0
    n_slots = (n + chunk - 1) // chunk * chunk
    for item in range(n_slots * units):
        unit, j = item_tile(item, units, n, chunk)
        start = max(start, heapq.heappop(free))  # dispatched in item order
        if j < 0:
            heapq.heappush(free, start)
            continue
        t_c = start + o / 2
        w_end = []
        for s, q in enumerate(walk[j]):
            c_start = max(t_c, w_end[s - 2] if s >= 2 else 0.0)
            t_c = c_start + c
            above = next((k for k in range(j + 1, n) if q in listed[k]), None)
            turn = added[(unit, above, q)] if above is not None else 0.0
            w = max(t_c, w_end[s - 1] if s >= 1 else 0.0, turn) + a
            w_end.append(w)
            added[(unit, j, q)] = w
        done = (w_end[-1] if w_end else t_c) + o / 2
        end_all = max(end_all, done)
        heapq.heappush(free, done)
    return end_all


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=128, help="batch x KV heads (b4 h32: 128)")
    ap.add_argument("--n", type=int, default=64, help="key tiles of 128 keys (s 8192: 64)")
    ap.add_argument("--chunk", type=int, default=16, help="det_chunk (2048 / kBlockN)")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--a", type=float, default=0.25, help="the writer's add, in steps")
    ap.add_argument("--o", type=float, default=0.5, help="a CTA's prologue + epilogue, in steps")
    ap.add_argument("--dense-ms", type=float, default=10.34, help="measured dense deterministic causal")
    args = ap.parse_args()
    chunk = min(args.chunk, args.n)
    res = {s: simulate(s, args.units, args.n, chunk, args.sms, a=args.a, o=args.o)
           for s in ("dense-causal", "bits-now", "bits-fixed", "dense-full")}
    ms_per_step = args.dense_ms / res["dense-causal"]
    ideal = args.units * sum(len(w) for w in lists("dense-causal", args.n, 2 * args.n)) / args.sms
    print(f"units {args.units} key tiles {args.n} chunk {chunk} sms {args.sms} add {args.a} o {args.o}")
    print(f"causal work / SM (ideal): {ideal:.0f} steps")
    for s, t in res.items():
        base = res["dense-full"] if s == "dense-full" else res["dense-causal"]
        print(f"{s:13s} {t:9.0f} steps  {t / base:6.3f} x dense  ~{t * ms_per_step:7.2f} ms")


if __name__ == "__main__":
    main()
