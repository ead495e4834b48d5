"""Runs every peer on every case and collects times; a peer's failure is recorded, not fatal."""
from __future__ import annotations

import gc

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


def run_case(case, peer_table, device, torch, reps, log):
    """{peer: {"ms", "tflops"} or {"error"}} for one case; stops early on a lost CUDA context."""
    results = {}
    inputs = P.make_inputs(case, device, torch)
    first = None  # the first peer's output (fastattn's when it runs): every other is compared to it
    for name, prepare in peer_table.items():
        try:
            fn = prepare(case, inputs)
            out = P.output_bshd(fn, fn())
            diff = None
            if first is None:
                first = (name, out)
            else:
                diff = float(np.max(np.abs(out - first[1]))) if out.size else 0.0
            if device == "cuda":
                ms = time_cuda(fn, torch, reps=reps)
            else:
                ms = time_cpu(fn, reps=reps)
            results[name] = {"ms": ms, "tflops": case.flops() / (ms * 1e-3) / 1e12}
            if diff is not None:
                results[name].update(max_abs_diff=diff, compared_to=first[0])
            rate = (f"{results[name]['tflops']:8.1f} TFLOPS" if device == "cuda"
                    else f"{results[name]['tflops'] * 1e3:8.2f} GFLOPS")
            log(f"  {name:16s} {ms:9.3f} ms {rate}")
        except Exception as e:  # noqa: BLE001 - every peer failure is reported, never fatal
            results[name] = {"error": _error_text(e)}
            log(f"  {name:16s} failed: {results[name]['error']}")
            if device == "cuda" and context_lost(torch):
                results[name]["error"] += " (CUDA context lost: run stopped)"
                break
        if device == "cuda":
            torch.cuda.empty_cache()
    del inputs, first
    gc.collect()
    return results


def run_all(cases, peer_table, device, torch, reps, log=print):
    """One row per case; after a lost CUDA context the rows so far are returned."""
    rows = []
    for case in cases:
        log(f"{case.preset}: {case.label} ({case.flops() / 1e9:.1f} GFLOP)")
        rows.append({"case": case.as_dict(), "series": case.series(),
                     "peers": run_case(case, peer_table, device, torch, reps, log)})
        if any("CUDA context lost" in r.get("error", "") for r in rows[-1]["peers"].values()):
            log("CUDA context lost: writing the results so far")
            break
    return rows
