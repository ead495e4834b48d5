#!/usr/bin/env python3
"""Draws the timeline of `fastattn profile`'s traced tile: one row per consumer warpgroup (its
loop regions) and the inferred tensor-core row (QK and PV of both warpgroups), like seed 003's
diagram. Usage:

    tools/profile/plot_timeline.py profile-out/profile.json --out profile-out/timeline.png
        [--first 2] [--count 6]

--first/--count pick the iterations drawn (the first ones include the prologue; the trace keeps
at most 16). Prints one line: the tensor cores' inferred busy share over the drawn window.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline_model as tm  # noqa: E402

COLORS = {
    "wait_kv": "#9e9e9e", "wait_turn": "#e6c229", "issue_mma": "#1f5fbf", "wait_qk": "#8fb8ef",
    "mask": "#f29e4c", "softmax": "#d62728", "wait_pv": "#f7a8b8", "rescale": "#2ca02c",
    "loop_back_edge": "#222222", "prologue": "#7b4fa0", "qk": "#0b3d91", "pv": "#17803d",
}
LABELS = {
    "wait_kv": "wait K/V tiles", "wait_turn": "wait turn (ping-pong)", "issue_mma": "issue QK+PV",
    "wait_qk": "wait QK (wait<1>)", "mask": "mask", "softmax": "softmax", "wait_pv": "wait PV (wait<0>)",
    "rescale": "rescale O, convert P", "loop_back_edge": "loop back edge", "prologue": "prologue",
    "qk": "TC: QK", "pv": "TC: PV",
}


def window(segs, first, count):
    """Cycle range of iterations [first, first + count) over both warpgroups."""
    chosen = [s for s in segs if first <= s.iteration < first + count and s.kind != "prologue"]
    if first == 0:
        chosen += [s for s in segs if s.kind == "prologue"]
    if not chosen:
        chosen = segs
    return min(s.start for s in chosen), max(s.end for s in chosen)


def plot(profile, out, first, count):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    wg_segs, tc_segs, pv = tm.build(profile)
    lo, hi = window(wg_segs, first, count)
    busy = tm.busy_fraction(tc_segs, lo, hi)
    rows = [("wg0", "WG0 (CUDA cores)"), ("wg1", "WG1 (CUDA cores)"), ("tc", "tensor cores (inferred)")]
    fig, ax = plt.subplots(figsize=(16, 3.6))
    for y, (row, _) in enumerate(rows):
        for s in (tc_segs if row == "tc" else wg_segs):
            if s.row != row or s.end <= lo or s.start >= hi or s.end <= s.start:
                continue
            ax.broken_barh([(s.start, s.end - s.start)], (len(rows) - 1 - y - 0.4, 0.8),
                           facecolors=COLORS.get(s.kind, "#cccccc"), edgecolor="white", linewidth=0.3,
                           hatch="//" if row == "tc" and s.wg == 1 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for _, label in reversed(rows)])
    ax.set_xlim(lo, hi)
    ax.set_xlabel("SM cycles from the traced tile's start")
    p = profile["problem"]
    k = profile["kernel"]
    pv_note = f"PV {pv:.0f} cyc (PV-sync run)" if pv is not None else "PV assumed = shortest QK"
    ax.set_title(f"b={p['batch']} s={p['seqlen_q']} h={p['heads']}/{p['kv_heads']} d={p['dim']} {p['dtype']}"
                 f"{' causal' if p['causal'] else ''} | tile {k['block_m']}x{k['block_n']} | "
                 f"SM {profile['runs']['pipeline']['trace']['smid']} | TC busy (inferred) {100 * busy:.0f}% | "
                 f"{pv_note} | hatched: WG1's GEMMs", fontsize=9)
    shown = [s for s in wg_segs + tc_segs if s.end > lo and s.start < hi]
    kinds = [kd for kd in LABELS if any(s.kind == kd for s in shown)]
    ax.legend(handles=[Patch(facecolor=COLORS[kd], label=LABELS[kd]) for kd in kinds], loc="upper center",
              bbox_to_anchor=(0.5, -0.28), ncol=min(len(kinds), 7), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return busy, pv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="profile.json written by `fastattn profile`")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--first", type=int, default=2, help="first iteration drawn (default 2)")
    ap.add_argument("--count", type=int, default=6, help="iterations drawn (default 6)")
    a = ap.parse_args(argv)
    with open(a.json) as f:
        profile = json.load(f)
    if not str(profile.get("format", "")).startswith("fastattn-profile/"):
        sys.exit(f"{a.json}: not a `fastattn profile` JSON")
    try:
        busy, pv = plot(profile, a.out, a.first, a.count)
    except ValueError as e:
        sys.exit(f"{a.json}: {e}")
    print(f"timeline  {a.out} (tensor cores busy {100 * busy:.0f}% of the drawn window, inferred; "
          f"{'PV %.0f cycles from the PV-sync run' % pv if pv is not None else 'no PV-sync run'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
