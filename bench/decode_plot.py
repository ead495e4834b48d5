#!/usr/bin/env python3
"""Bars of bench/decode.py runs: per case, our time and the copy floor over SDPA-cuDNN's time in the same run
(times from different runs are not compared: each run's cuDNN is its own yardstick); with --peers, the last
run's other peers (FA3, FlashInfer) beside ours, over the same cuDNN time.

    python3 bench/decode_plot.py OUT.png LABEL=RUN.md [LABEL=RUN.md ...] [--title TEXT] [--peers fa3,fi-tc]

RUN.md: bench/decode.py's stdout (its "sq=1 b=... fastattn=... cudnn=..." lines).
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


PEERS = ("fa3", "fi", "fi-tc")  # bench/decode.py's other peers' keys (FA3; FlashInfer CUDA-core / tensor-core)


def read_run(path):
    """{(batch, s_k): {"fastattn": us, "cudnn": us, "floor": us, and each peer of PEERS the line has}} from a
    run's per-case lines (s_q 1)."""
    rows = {}
    for line in open(path):
        if not line.startswith("sq=1 "):
            continue
        f = dict(kv.split("=") for kv in line.split())
        rows[(int(f["b"]), int(f["sk"]))] = {k: float(f[k]) for k in ("fastattn", "cudnn", "floor") + PEERS if k in f}
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+", help="LABEL=RUN.md")
    ap.add_argument("--title", default="decode (s_q 1, h 32/8, d 128, bf16): time / SDPA-cuDNN's time in the same run")
    ap.add_argument("--peers", default="", help=f"the last run's peers to draw beside ours (comma-separated, of {PEERS})")
    a = ap.parse_args(argv)
    runs = [(r.split("=", 1)[0], read_run(r.split("=", 1)[1])) for r in a.runs]
    cases = sorted(set.intersection(*(set(rows) for _, rows in runs)))
    if not cases:
        raise SystemExit("decode_plot: no (batch, s_k) case common to every run")
    peers = [p for p in a.peers.split(",") if p]
    last_label, last = runs[-1]
    for p in peers:
        if p not in PEERS or any(p not in last[c] for c in cases):
            raise SystemExit(f"decode_plot: peer {p!r} is not in every case of run {last_label!r} (peers: {PEERS})")
    bars_per_case = len(runs) + len(peers) + 1
    width = 0.8 / bars_per_case
    fig, ax = plt.subplots(figsize=(0.32 * bars_per_case * len(cases) + 2, 4.2))
    series = [(f"fastattn, {label}", rows, "fastattn", None) for label, rows in runs]
    series += [(f"{p} ({last_label})", last, p, None) for p in peers]
    series += [(f"copy floor ({last_label})", last, "floor", "0.75")]
    for i, (label, rows, key, color) in enumerate(series):
        ys = [rows[c][key] / rows[c]["cudnn"] for c in cases]
        bars = ax.bar([x + i * width for x in range(len(cases))], ys, width, label=label, color=color)
        if key != "floor":
            ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([x + width * (bars_per_case - 1) / 2 for x in range(len(cases))])
    ax.set_xticklabels([f"b{b} s_k {sk // 1024}k" for b, sk in cases])
    ax.set_ylabel("time / cuDNN's time (lower is faster)")
    ax.set_title(a.title, fontsize=9)
    ax.set_ylim(0, max(1.0, ax.get_ylim()[1]) * 1.08)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(bars_per_case, 4))
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
