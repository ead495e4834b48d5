"""Benchmark outputs: results.json, results.md (TFLOPS per peer, ratio to the baseline) and
results.png (TFLOPS vs seqlen, one panel per series, one line per peer)."""
from __future__ import annotations

import json
import math
import os


DISAGREE = 0.05  # max |out - first peer's out| above which a row is flagged (bf16 ~ 0.01)


def write_json(path, meta, rows):
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)


def _scale(meta):
    """Unit and multiplier from TFLOPS: GFLOPS reads better for CPU runs."""
    return ("GFLOPS", 1e3) if meta.get("unit") == "GFLOPS" else ("TFLOPS", 1.0)


def _cell(result, mult):
    if result.get("tflops") is not None:
        value = result["tflops"] * mult
        return f"{value:.1f}" if value >= 10 else f"{value:.3g}"
    return "n/a"


def ratio_stats(row, baseline):
    """fastattn / baseline speed (baseline ms / fastattn ms) per round, where both were timed in
    the same rounds: {"median", "min", "max", "rounds"}; from the medians when rounds are absent."""
    res = row["peers"]
    ours, base = res.get("fastattn", {}), res.get(baseline, {})
    a, b = ours.get("ms_rounds"), base.get("ms_rounds")
    if a and b and len(a) == len(b):
        rs = [y / x for x, y in zip(a, b) if x and y]
    elif ours.get("tflops") and base.get("tflops"):
        rs = [ours["tflops"] / base["tflops"]]
    else:
        return None
    if not rs:
        return None
    rs_sorted = sorted(rs)
    mid = len(rs_sorted) // 2
    median = rs_sorted[mid] if len(rs_sorted) % 2 else (rs_sorted[mid - 1] + rs_sorted[mid]) / 2
    return {"median": median, "min": rs_sorted[0], "max": rs_sorted[-1], "rounds": rs}


def markdown(meta, rows, peers, baseline):
    """A table: one row per case, TFLOPS per peer, fastattn / baseline ratio and its spread over
    rounds; failures below."""
    unit, mult = _scale(meta)
    head = ["case"] + [f"{p} {unit}" for p in peers] + [f"fastattn / {baseline}", "spread"]
    rounds = meta.get("rounds", 1)
    lines = [f"# fastattn forward benchmark ({meta['device']})", "",
             f"{meta['date']} · torch {meta.get('torch') or 'absent'} · {meta['timing']} · "
             f"{unit} = 4·b·h·d·(kept query-key pairs) / time", "",
             f"{rounds} round(s) per case, peers in a rotated order each round; a time is the median over "
             f"rounds. fastattn / {baseline} = {baseline} time / fastattn time in each round, median over "
             "rounds; spread = its min-max over rounds.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for row in rows:
        res = row["peers"]
        q = ratio_stats(row, baseline)
        ratio = f"{q['median']:.2f}" if q else "n/a"
        spread = f"{q['min']:.2f}-{q['max']:.2f}" if q and len(q["rounds"]) > 1 else "-"
        lines.append("| " + " | ".join([row["case"]["label"]] + [_cell(res.get(p, {}), mult) for p in peers]
                                       + [ratio, spread]) + " |")
        for p in peers:
            r = res.get(p, {})
            if r.get("error"):
                notes.append(f"- {row['case']['label']} · {p}: {r['error']}")
            elif r.get("max_abs_diff", 0) > DISAGREE:
                notes.append(f"- {row['case']['label']} · {p}: max |out - {r['compared_to']}| = "
                             f"{r['max_abs_diff']:.3g}")
    if notes:
        lines += ["", f"Failures, and outputs that differ by more than {DISAGREE} "
                  "(the max |difference| to the first peer is in results.json):", ""] + notes
    return "\n".join(lines) + "\n"


def plot(path, meta, rows, peers):
    """TFLOPS vs seqlen per peer, one panel per series; returns False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    unit, mult = _scale(meta)
    series = {}
    for row in rows:
        series.setdefault(row["series"], []).append(row)
    n = len(series)
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for ax, (name, group) in zip(axes.flat, series.items()):
        for peer in peers:
            pts = [(r["case"]["s_k"], r["peers"].get(peer, {}).get("tflops")) for r in group]
            pts = [(s, t * mult) for s, t in pts if t is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=peer)
        ax.set_title(name, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("seqlen")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(out_dir, meta, rows, peers, baseline):
    """Writes the three files; returns their paths (the PNG only when matplotlib is present)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in ("results.json", "results.md", "results.png")]
    write_json(paths[0], meta, rows)
    with open(paths[1], "w") as f:
        f.write(markdown(meta, rows, peers, baseline))
    if not plot(paths[2], meta, rows, peers):
        paths.pop()
    return paths
