#!/usr/bin/env python3
"""Bars of bench/alibi_bench.py's output: TFLOPS of each side, one group a (mode, d, causal) table.

    python3 bench/alibi_plot.py OUT.png RUN.md[:fwd|bwd] [RUN.md[:fwd|bwd] ...] [--title TEXT]

Each RUN.md is one alibi_bench.py run (its markdown, as printed); ':fwd' or ':bwd' keeps only that mode's tables
(so that a figure can take each mode from the call that measured the shipped kernel). Groups are labelled with the
run's file name, as ratios hold within one run only.
"""
import argparse
import os
import re


def read_tables(path, mode=None):
    """[(title, [(side, ms, tflops)])] of one alibi_bench.py output, in order; `mode` keeps fwd or bwd tables."""
    tables, title, rows = [], None, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^(?:### )?(fwd|bwd) d (\d+) causal (\d)", line)
            if m:
                title, rows = f"{m.group(1)} d{m.group(2)} {'causal' if m.group(3) == '1' else 'full'}", []
                if mode is None or m.group(1) == mode:
                    tables.append((title, rows))
                continue
            cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []
            if rows is not None and len(cells) >= 3 and cells[0] not in ("side",) and not cells[0].startswith("---"):
                if title.startswith("bwd") and cells[0].endswith(" fwd"):
                    continue  # a backward table's forward-alone row: not a backward side
                try:
                    rows.append((cells[0], float(cells[1]), float(cells[2])))
                except ValueError:
                    pass
    return tables


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("png")
    ap.add_argument("runs", nargs="+", help="alibi_bench.py outputs, each optionally :fwd or :bwd")
    ap.add_argument("--title", default="ALiBi on the GPU: TFLOPS by side (higher is better)")
    args = ap.parse_args(argv)
    groups = []
    for spec in args.runs:
        path, _, mode = spec.partition(":")
        if mode not in ("", "fwd", "bwd"):
            ap.error(f"{spec}: the mode after ':' is fwd or bwd")
        for title, rows in read_tables(path, mode or None):
            groups.append((f"{title}\n({os.path.basename(path)})", rows))
    if not groups:
        ap.error("no alibi_bench.py table in the given runs")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sides = []
    for _, rows in groups:
        for side, _, _ in rows:
            if side not in sides:
                sides.append(side)
    colors = {side: f"C{k % 10}" for k, side in enumerate(sides)}
    fig, ax = plt.subplots(figsize=(max(8, 2.2 * len(groups)), 4.5))
    labelled = set()
    for g, (_, rows) in enumerate(groups):  # each group's own sides, side by side
        width = 0.8 / len(rows)
        for k, (side, _, tf) in enumerate(rows):
            x = g + (k - (len(rows) - 1) / 2) * width
            ax.bar(x, tf, width, color=colors[side], label=None if side in labelled else side)
            ax.text(x, tf, f"{tf:.0f}", ha="center", va="bottom", fontsize=6)
            labelled.add(side)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g for g, _ in groups], fontsize=8)
    ax.set_ylabel("TFLOPS")  # fwd 4 b h s^2 d, bwd 2.5 x, fwd + bwd 3.5 x, causal halved (alibi_bench.py)
    ax.set_title(args.title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"wrote {args.png} ({len(groups)} groups, {len(sides)} sides)")


if __name__ == "__main__":
    main()
