"""Runs every peer on every case and collects times; a peer's failure is recorded, not fatal."""
from __future__ import annotations

import gc

from . import peers as P
from .timing import time_cpu, time_cuda


def _error_text(e):
    text = f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return text[:200]


def run_case(case, peer_table, device, torch, reps, log):
    """{peer: {"ms", "tflops"} or {"error"}} for one case."""
    results = {}
    inputs = P.make_inputs(case, device, torch)
    for name, prepare in peer_table.items():
        try:
            fn = prepare(case, inputs)
            if device == "cuda":
                ms = time_cuda(fn, torch, reps=reps)
            else:
                ms = time_cpu(fn, reps=reps)
            results[name] = {"ms": ms, "tflops": case.flops() / (ms * 1e-3) / 1e12}
            rate = (f"{results[name]['tflops']:8.1f} TFLOPS" if device == "cuda"
                    else f"{results[name]['tflops'] * 1e3:8.2f} GFLOPS")
            log(f"  {name:16s} {ms:9.3f} ms {rate}")
        except Exception as e:  # noqa: BLE001 - every peer failure is reported, never fatal
            results[name] = {"error": _error_text(e)}
            log(f"  {name:16s} failed: {results[name]['error']}")
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
    del inputs
    gc.collect()
    return results


def run_all(cases, peer_table, device, torch, reps, log=print):
    rows = []
    for case in cases:
        log(f"{case.preset}: {case.label} ({case.flops() / 1e9:.1f} GFLOP)")
        rows.append({"case": case.as_dict(), "series": case.series(),
                     "peers": run_case(case, peer_table, device, torch, reps, log)})
    return rows
