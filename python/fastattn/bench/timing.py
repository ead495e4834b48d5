"""Median run time of a callable: CUDA events with an L2 flush before each run, or wall clock."""
from __future__ import annotations

import statistics
import time

SPIN_HZ = 2.0e9  # cycles/s for the GPU spin; above H100's boost clock, so a spin runs long, not short


def time_cuda(fn, torch, warmup=3, reps=20, flush_bytes=256 << 20, cooldown_s=0.25):
    """Median milliseconds of fn() by CUDA events; the L2 cache is flushed (a 256 MiB memset,
    outside the timed interval) before every run so each run reads its inputs from HBM.

    A GPU-side spin (torch.cuda._sleep) sized from the warm-up calls' host time keeps the GPU busy
    while the host queues all runs, so a peer's host work (SDPA dispatch, torch.compile guards,
    Python wrappers) is never idle GPU time inside a timed interval: kernels are compared, not
    launch paths.

    The GPU first idles for cooldown_s: an H100 at its power cap runs 15-30% below its boost clock,
    and without the pause each measurement would inherit the power state the previous peer left
    (docs/notes/bench-power.md)."""
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    if cooldown_s > 0:
        torch.cuda.synchronize()
        time.sleep(cooldown_s)
    host = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    if hasattr(torch.cuda, "_sleep"):
        per_run = (statistics.median(host) if host else 1e-4) + 30e-6  # + flush and two events
        torch.cuda._sleep(int(min(0.05, 1.5 * reps * per_run + 1e-4) * SPIN_HZ))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def time_cpu(fn, warmup=1, reps=5, budget_s=2.0):
    """Median milliseconds of fn() by wall clock; fewer reps when one run is slow."""
    first = 0.0
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
    reps = max(1, min(reps, int(budget_s / max(first, 1e-9))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
