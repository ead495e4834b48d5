"""Runs every peer on every case and collects times; a peer's failure is recorded, not fatal.

Per case: each peer runs once and its output is compared with the first peer's; then `rounds`
rounds time every peer that ran, in an order rotated by one per round, so slow drifts (clocks,
temperature) reach all peers alike. A peer's time is the median over rounds of its per-round
medians; `ms_rounds` keeps the per-round times for the ratio spread in the report.
"""
from __future__ import annotations

import gc
import statistics

import numpy as np

from . import peers as P
from .timing import time_cpu, time_cuda


def _error_text(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return text[:200]


def context_lost(torch):
    """True when the CUDA context is unusable (e.g. after an illegal memory access)."""
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001
        return True


def rotation(names, r):
    """Round r's order: the list rotated by r, so each peer leads one round in turn."""
    n = len(names)
    return list(names[r % n:]) + list(names[:r % n]) if n else []


def _lost(results, name, device, torch):
    if device == "cuda" and context_lost(torch):
        results[name]["error"] += " (CUDA context lost: run stopped)"
        return True
    return False


def run_case(case, peer_table, device, torch, reps, log, rounds=1):
    """{peer: {"ms", "tflops", "ms_rounds"} or {"error"}} for one case; stops on a lost CUDA context."""
    results, fns = {}, {}
    inputs = P.make_inputs(case, device, torch)
    first = None  # the first peer's output (fastattn's when it runs): every other is compared to it
    for name, prepare in peer_table.items():
        try:
            fn = prepare(case, inputs)
            out = P.output_bshd(fn, fn())
            results[name] = {}
            if first is None:
                first = (name, out)
            else:
                diff = float(np.max(np.abs(out - first[1]))) if out.size else 0.0
                results[name].update(max_abs_diff=diff, compared_to=first[0])
            fns[name] = fn
        except Exception as e:  # noqa: BLE001 - every peer failure is reported, never fatal
            results[name] = {"error": _error_text(e)}
            log(f"  {name:16s} failed: {results[name]['error']}")
            if _lost(results, name, device, torch):
                return results
    del first
    times = {name: [] for name in fns}
    for r in range(rounds):
        for name in rotation(list(fns), r):
            if "error" in results[name]:
                continue
            try:
                ms = time_cuda(fns[name], torch, reps=reps) if device == "cuda" else time_cpu(fns[name], reps=reps)
            except Exception as e:  # noqa: BLE001
                results[name] = {"error": _error_text(e)}
                log(f"  {name:16s} failed: {results[name]['error']}")
                if _lost(results, name, device, torch):
                    return results
                continue
            times[name].append(ms)
    for name, ts in times.items():
        if ts and "error" not in results[name]:
            ms = statistics.median(ts)
            results[name].update(ms=ms, tflops=case.flops() / (ms * 1e-3) / 1e12, ms_rounds=ts)
            rate = (f"{results[name]['tflops']:8.1f} TFLOPS" if device == "cuda"
                    else f"{results[name]['tflops'] * 1e3:8.2f} GFLOPS")
            spread = f"  (rounds {min(ts):.3f}-{max(ts):.3f} ms)" if len(ts) > 1 else ""
            log(f"  {name:16s} {ms:9.3f} ms {rate}{spread}")
    del inputs, fns
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return results


def run_all(cases, peer_table, device, torch, reps, log=print, rounds=1):
    """One row per case; after a lost CUDA context the rows so far are returned."""
    rows = []
    for case in cases:
        log(f"{case.preset}: {case.label} ({case.flops() / 1e9:.1f} GFLOP)")
        rows.append({"case": case.as_dict(), "series": case.series(),
                     "peers": run_case(case, peer_table, device, torch, reps, log, rounds)})
        if any("CUDA context lost" in r.get("error", "") for r in rows[-1]["peers"].values()):
            log("CUDA context lost: writing the results so far")
            break
    return rows
