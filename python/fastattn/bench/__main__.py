"""Command line of the benchmark: `python -m fastattn.bench [--quick] [--preset NAME] --out DIR`."""
from __future__ import annotations

import argparse
import datetime
import platform
import sys

import fastattn

from . import peers as P
from .cases import CPU_DEFAULT, GPU_DEFAULT, PRESETS, cases_for
from .report import write_all
from .run import run_all


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m fastattn.bench", description=__doc__)
    ap.add_argument("--preset", action="append", choices=sorted(PRESETS),
                    help="preset to run (repeatable); default: all GPU presets, or 'cpu' without a GPU")
    ap.add_argument("--quick", action="store_true", help="the small 'quick' (GPU) / 'cpu-quick' preset")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--peers", help="comma-separated subset of peers to run")
    ap.add_argument("--reps", type=int, default=None, help="timed runs per measurement")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds per case, peers in a rotated order each round (default 3 on a GPU, 1 on the CPU)")
    ap.add_argument("--out", default="bench-out", help="directory for results.{json,md,png}")
    ap.add_argument("--list", action="store_true", help="print presets and cases, then exit")
    return ap.parse_args(argv)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _device(choice, torch):
    gpu = torch is not None and torch.cuda.is_available()
    if choice == "cuda" and not gpu:
        raise SystemExit("--device cuda: torch with a CUDA device is required")
    return "cuda" if choice == "cuda" or (choice == "auto" and gpu) else "cpu"


def _peer_table(device, torch, subset):
    if device == "cuda":
        table, baseline = dict(P.GPU_PEERS), P.GPU_BASELINE
    elif torch is not None:
        table, baseline = dict(P.CPU_TORCH_PEERS), "torch-sdpa"
    else:
        table, baseline = dict(P.CPU_NUMPY_PEERS), "numpy"
    if subset:
        wanted = [p.strip() for p in subset.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in table]
        if unknown:
            raise SystemExit(f"--peers: unknown {unknown} (on {device}: {', '.join(table)})")
        table = {p: table[p] for p in wanted}
    return table, baseline


def main(argv=None):
    args = _parse(argv)
    torch = _torch()
    device = _device(args.device, torch)
    presets = args.preset or (("quick" if device == "cuda" else "cpu-quick",) if args.quick
                              else (GPU_DEFAULT if device == "cuda" else CPU_DEFAULT))
    cases = cases_for(presets)
    if args.list:
        for c in cases:
            print(f"{c.preset:15s} {c.label:45s} {c.flops() / 1e9:10.1f} GFLOP")
        return 0
    table, baseline = _peer_table(device, torch, args.peers)
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU {platform.processor() or platform.machine()}"
    meta = {"device": name, "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "fastattn": fastattn.__version__, "build": fastattn.build_info(),
            "torch": getattr(torch, "__version__", None), "presets": list(presets),
            "timing": ("median of CUDA-event times, L2 flushed before each run, host work hidden behind a GPU spin"
                       if device == "cuda" else "median of wall-clock times"),
            "flops": "4*b*h*d*(kept query-key pairs); dense = 4*b*h*s_q*s_k*d",
            "unit": "TFLOPS" if device == "cuda" else "GFLOPS"}
    reps = args.reps or (20 if device == "cuda" else 5)
    meta["rounds"] = args.rounds or (3 if device == "cuda" else 1)
    rows = run_all(cases, table, device, torch, reps, rounds=meta["rounds"])
    paths = write_all(args.out, meta, rows, list(table), baseline)
    print("wrote " + ", ".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
