#!/usr/bin/env python3
"""Bars of bench/decode.py runs: per case, our time and the copy floor over SDPA-cuDNN's time in the same run
(times from different runs are not compared: each run's cuDNN is its own yardstick).

    python3 bench/decode_plot.py OUT.png LABEL=RUN.md [LABEL=RUN.md ...] [--title TEXT]

RUN.md: bench/decode.py's stdout (its "sq=1 b=... fastattn=... cudnn=..." lines).
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_run(path):
    """{(batch, s_k): {"fastattn": us, "cudnn": us, "floor": us}} from a run's per-case lines."""
    rows = {}
    for line in open(path):
        if not line.startswith("sq=1 "):
            continue
        f = dict(kv.split("=") for kv in line.split())
        rows[(int(f["b"]), int(f["sk"]))] = {k: float(f[k]) for k in ("fastattn", "cudnn", "floor")}
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+", help="LABEL=RUN.md")
    ap.add_argument("--title", default="decode (s_q 1, h 32/8, d 128, bf16): time / SDPA-cuDNN's time in the same run")
    a = ap.parse_args(argv)
    runs = [(r.split("=", 1)[0], read_run(r.split("=", 1)[1])) for r in a.runs]
    cases = sorted(set.intersection(*(set(rows) for _, rows in runs)))
    if not cases:
        raise SystemExit("decode_plot: no (batch, s_k) case common to every run")
    width = 0.8 / (len(runs) + 1)
    fig, ax = plt.subplots(figsize=(1.4 * len(cases) + 2, 4.2))
    for i, (label, rows) in enumerate(runs):
        ys = [rows[c]["fastattn"] / rows[c]["cudnn"] for c in cases]
        bars = ax.bar([x + i * width for x in range(len(cases))], ys, width, label=f"fastattn, {label}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    floor = [runs[-1][1][c]["floor"] / runs[-1][1][c]["cudnn"] for c in cases]
    ax.bar([x + len(runs) * width for x in range(len(cases))], floor, width, color="0.75",
           label=f"copy floor ({runs[-1][0]})")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([x + width * len(runs) / 2 for x in range(len(cases))])
    ax.set_xticklabels([f"b{b} s_k {sk // 1024}k" for b, sk in cases])
    ax.set_ylabel("time / cuDNN's time (lower is faster)")
    ax.set_title(a.title, fontsize=9)
    ax.set_ylim(0, max(1.0, ax.get_ylim()[1]) * 1.08)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(runs) + 1)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
