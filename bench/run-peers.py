#!/usr/bin/env python3
"""Forward attention: fastattn beside its peers on the GPU, every peer measured the same way.

Peers: torch SDPA with the cuDNN, flash (FA2) and memory-efficient backends, FlexAttention
(torch.compile), FlashAttention-4 (flash_attn.cute, the CuTe-DSL wheel flash-attn-4, when importable:
--fa4-site names the folder it was pip-installed into; its column is '-' with the reason printed
otherwise), FFPA (ffpa_attn, the CuTe-DSL split-D attention for head dims 320-1024, from the PyPI
wheel ffpa-attn: --ffpa-site likewise; only cases with d >= 320 and no window reach it), and cuDNN
once more on contiguous (b, h, s, d) copies ("cudnn-bhsd": the layout every torch peer got in the
runs up to 5ebca72). fastattn is reached through its C ABI
(libfastattn.so, by ctypes), so this needs no Python build.

Method
- Inputs: q, k, v in (b, s, h, d), fastattn's layout; the torch peers read the same memory through
  transposed (b, h, s, d) views. GQA: the SDPA peers get K/V expanded to h_q heads (cuDNN takes no
  enable_gqa), Flex gets enable_gqa=True. Flex is compiled afresh for each case (dynamo reset), its
  mask_mod bottom-right aligned like fastattn's.
- Check: each peer's first output against fastattn's. Above 0.05 max |diff| the peer is "wrong", is
  not timed, and the worst element, the wrong query rows and the zero rows are printed; for Flex
  also its block counts against the mask's own, and a second try on contiguous copies.
- Rounds: R rounds per case (--rounds, 3). A round times every peer once, in an order rotated by
  one per round, so drifts (clocks, temperature) reach all peers alike. A time is the median of N
  CUDA-event timings (--reps, 20) after W warm-ups (--warmup, 3); a 256 MiB memset flushes L2
  before each timed call (--no-flush skips it: the do_bench numbers in ../shared/baselines were
  taken without), and a GPU-side spin lets the host queue the whole batch first, so host launch
  work (SDPA dispatch, Flex's guards) never shows up as idle GPU time inside a timed interval.
- Power: the H100s this runs on sit at their 700 W cap under attention (NVML reason "SW power
  cap"); held there for seconds their SM clock falls from ~1.98 GHz to 1.35-1.6 GHz, and a burst
  that follows another peer's inherits its power state (the same kernel measured 1.57 ms in short
  bursts and 1.79-1.84 ms held; docs/notes/bench-power.md). So the GPU idles --cooldown-ms (250)
  before each measurement, and NVML's SM clock is sampled while the timed calls run: each time has
  its clock, and "cycle ratio" = (cuDNN ms x cuDNN MHz) / (fastattn ms x fastattn MHz) per round
  tells the kernels' cycles apart from the clock each one ran at.
- Reported: per peer the median over rounds; ratio = sdpa-cudnn ms / fastattn ms in each round
  (> 1: fastattn faster), its median over rounds and its min-max spread; the median SM clock of
  fastattn's and cuDNN's timed calls, and the cycle ratio (median over rounds).
- FLOPs: 2 * b * h_q * (d + d_v) * kept (i, j) pairs per head (QK^T at d, PV at d_v; 4*b*h*d per
  pair where d_v = d): dense s_q*s_k pairs, causal s(s+1)/2, windows their exact pair count. The
  backward counts 2.5 x that.
- d_v != d (--preset dv: DeepSeek's d 192 with d_v 128): q, k at d; v, out, dout at d_v. A peer
  that refuses the shape (SDPA's flash backend wants one head dim) shows "n/a", its reason below
  the table (for SDPA the reasons PyTorch warns of when it finds no kernel).
- HBM floor: bytes of q, k, v, o over the copy bandwidth measured in the same run (1 GiB
  device-to-device copy, bytes read + written / time); the local rows show fastattn / floor.
- Isolation: a driver runs the measurements in a worker process; when the worker loses its CUDA
  context or dies, the driver restarts it at that case without the peer that broke it.

Writes peers.json, peers.md and events.jsonl (the worker's record, line by line) into --out.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

PEERS = ("fastattn", "fa3", "fa4", "ffpa", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "flex", "cudnn-bhsd")
BASELINE = "sdpa-cudnn"
TOL = 0.05           # max |out - fastattn's out| above which a peer is wrong (bf16 noise ~0.01)
FLUSH_BYTES = 256 << 20
COPY_BYTES = 1 << 30
EXIT_LOST = 3        # worker exit status: CUDA context lost
MAX_WORKERS = 4      # first worker + restarts
LEFT_OUT = "left out: "  # the reason of a peer --exclude left out (else it broke a worker)
FLOOR_TARGET = 1.25  # local rows: fastattn within 1.25x of the HBM floor
SPIN_HZ = 2.0e9      # cycles/s for the GPU spin; above H100's boost clock, so spins run long, not short
FFPA_MIN_D = 320     # below it FFPA's public entry hands the call to SDPA: not an FFPA kernel, so '-'
FLOPS_RULE = ("2*b*h_q*(d+d_v)*kept_pairs, i.e. 4*b*h_q*d*kept_pairs at d_v = d (dense: s_q*s_k; causal: s(s+1)/2; "
              "windows: exact pair count)")


class Nvml:
    """The SM clock through NVML (libnvidia-ml.so.1 by ctypes: no Python package needed); every
    reading is None where NVML is missing or fails."""
    CLOCK_SM = 1

    def __init__(self, pci_bus_id=None):
        self.lib = self.handle = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            found = pci_bus_id is not None and lib.nvmlDeviceGetHandleByPciBusId_v2(
                pci_bus_id.encode(), ctypes.byref(handle)) == 0
            if not found:  # no bus id: NVML's device 0, which is CUDA's device 0 without CUDA_VISIBLE_DEVICES
                found = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0
            if found:
                self.lib, self.handle = lib, handle
        except (OSError, AttributeError):
            pass

    def sm_mhz(self):
        if self.handle is None:
            return None
        v = ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetClockInfo(self.handle, self.CLOCK_SM, ctypes.byref(v)) == 0 else None


class NotApplicable(Exception):
    """The peer cannot express the case (SDPA has no sliding window): a '-' cell, not an error."""


class Refused(Exception):
    """The peer was asked and refused the shape (no kernel for it): an "n/a" cell, its reason in the notes."""


def v_dim(c):
    """The case's V head dim (v, out, dout): d unless the case names d_v."""
    return c.get("dv") or c["d"]


def dims_label(c):
    """'d128', or 'd192/128' where d_v != d."""
    return f"d{c['d']}" + (f"/{v_dim(c)}" if v_dim(c) != c["d"] else "")


# --- the plan: cases, FLOPs, bytes, statistics, tables (no torch needed) ----------------------

def dv_cases(add, mask_name):
    """--preset dv: d 192 with d_v 128 (DeepSeek's shape), b 2 h 16, s 4k and 8k, full and causal."""
    for s in (4096, 8192):
        for causal in (False, True):
            add(f"dense d192/128 s{s} {mask_name(causal)}", 2, s, 16, 16, 192, causal, dv=128)


def splitd_cases(add, mask_name):
    """--preset splitd: the split-D forward's head dims 320, 512, 1024 at b 1 h 16 s 8k, full and causal
    (docs/notes/splitd-sm90.md); SDPA's cuDNN / flash backends and Flex do not take these dims; FFPA, the
    split-D rival, does (with --ffpa-site: bench/ffpa/callA.sh and callB.sh run it on the device)."""
    for d in (320, 512, 1024):
        for causal in (False, True):
            add(f"dense d{d} s8192 {mask_name(causal)}", 1, 8192, 16, 16, d, causal)


def cases(preset="full", smoke=False):
    """Case dicts in run order. smoke: tiny shapes for a CPU run of the whole pipeline."""
    out = []

    def add(name, b, s, h, hkv, d, causal=False, window=(-1, -1), dtype="bfloat16", dv=None):
        out.append(dict(name=name, b=b, s=s, h=h, hkv=hkv, d=d, dv=dv or d, causal=causal, window=list(window),
                        dtype=dtype))
    if preset == "dv" and not smoke:
        dv_cases(add, lambda causal: "causal" if causal else "full")
        return out
    if preset == "splitd" and not smoke:
        splitd_cases(add, lambda causal: "causal" if causal else "full")
        return out
    if smoke:
        for d in (64, 128):
            for causal in (False, True):
                add(f"dense d{d} s256 {'causal' if causal else 'full'}", 2, 256, 2, 2, d, causal)
        add("gqa b1 s256 h4/2 d128 fp16", 1, 256, 4, 2, 128, dtype="float16")
        for d in (64, 128):
            add(f"local(64,0) d{d} s512", 1, 512, 2, 2, d, window=(64, 0))
        add("dense d64/32 s256 causal", 1, 256, 2, 2, 64, True, dv=32)
        return out
    seqs = [1024, 4096, 8192, 16384] if preset == "full" else [1024, 8192]
    dims = [64, 128, 256] if preset == "full" else [128]
    for d in dims:
        for s in seqs:
            for causal in (False, True):
                add(f"dense d{d} s{s} {'causal' if causal else 'full'}", 16384 // s, s, 2048 // d, 2048 // d,
                    d, causal)
    add("gqa b4 s4096 h64/8 d128 fp16", 4, 4096, 64, 8, 128, dtype="float16")
    for d, h in ((64, 32), (128, 16)):
        add(f"local(64,0) d{d} s8192", 2, 8192, h, h, d, window=(64, 0))
    return out


def is_local(c):
    return tuple(c["window"]) != (-1, -1)


def applicable(c, peer, smoke=False):
    """Whether the peer can run the case at all (else a '-' cell)."""
    if peer.startswith("sdpa-") or peer == "cudnn-bhsd":
        return not is_local(c)  # SDPA: no sliding window; every case here has s_q == s_k
    if peer == "flex":
        return smoke or c["d"] == 128 or is_local(c) or v_dim(c) != c["d"]  # d128, windows, d_v: few compiles
    if peer in ("fa3", "fa4"):
        return not smoke  # Hopper-only; whether the peer is there is the worker's to say
    if peer == "ffpa":  # its dense op has no window; the rest (d_v, d > 1024, dtype) FFPA refuses itself: n/a
        return not smoke and not is_local(c) and c["d"] >= FFPA_MIN_D
    return True


def window_of(causal, window):
    """(left, right) of the mask, -1 = unbounded; causal is right = 0; None when nothing is masked."""
    left, right = window
    if causal:
        right = 0
    return None if left < 0 and right < 0 else (left, right)


def kept_pairs(sq, sk, causal, window):
    """Exact (i, j) pairs kept per (batch, head), bottom-right aligned as fastattn."""
    w = window_of(causal, window)
    if w is None:
        return sq * sk
    wl, wr = w
    total = 0
    for i in range(sq):
        diag = i + sk - sq
        lo = 0 if wl < 0 else max(0, diag - wl)
        hi = sk if wr < 0 else min(sk, diag + wr + 1)
        total += max(0, hi - lo)
    return total


def case_flops(c):
    """2*b*h_q*(d + d_v) per kept pair: S = QK^T (2d per pair) and O = PV (2 d_v per pair)."""
    return 2.0 * c["b"] * c["h"] * (c["d"] + v_dim(c)) * kept_pairs(c["s"], c["s"], c["causal"], tuple(c["window"]))


def case_bytes(c):
    """Bytes of q, k (d) and v, o (d_v) (2-byte dtypes): the least any forward must move through HBM."""
    return 2 * c["b"] * c["s"] * (c["d"] * (c["h"] + c["hkv"]) + v_dim(c) * (c["hkv"] + c["h"]))


def rotation(peers, r):
    """Round r's order: the peer list rotated by r, so each peer leads one round in turn."""
    n = len(peers)
    return list(peers[r % n:]) + list(peers[:r % n]) if n else []


def over_rounds(times):
    """Median of the per-round times that exist (None: not timed in that round)."""
    xs = [t for t in times if t is not None]
    return statistics.median(xs) if xs else None


def ratio_stats(ours, base):
    """Per-round base/ours (> 1: ours faster) over rounds where both ran: median, min, max."""
    rs = [b / o for o, b in zip(ours, base) if o and b]
    if not rs:
        return None
    return dict(median=statistics.median(rs), min=min(rs), max=max(rs), rounds=rs)


def cycle_ratio(ours, base):
    """Per-round (base ms x base MHz) / (ours ms x ours MHz): the ratio at equal clocks, over rounds
    where both times have a clock."""
    def cycles(x):
        return [t * m if t and m else None for t, m in zip(x.get("ms_rounds", []), x.get("mhz_rounds", []))]
    return ratio_stats(cycles(ours), cycles(base))


def ranges(idx, limit=6):
    """'0-127, 256, ...' for sorted ints: where the wrong query rows are, compactly."""
    spans = []
    for i in idx:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans[:limit])
    return text + (f", ... ({len(spans)} ranges)" if len(spans) > limit else "")


def block_classes(sq, sk, causal, window, bq=128, bk=128):
    """(partial, full) (q-block, kv-block) counts of the mask, as a correct BlockMask has them."""
    wl, wr = window
    if causal:
        wr = 0
    partial = full = 0
    for qb in range(0, sq, bq):
        rows = range(qb, min(sq, qb + bq))
        for kb in range(0, sk, bk):
            width = min(sk, kb + bk) - kb
            kept = 0
            for i in rows:
                diag = i + sk - sq
                lo = 0 if wl < 0 else max(0, diag - wl)
                hi = sk if wr < 0 else min(sk, diag + wr + 1)
                kept += max(0, min(hi, kb + width) - max(lo, kb))
            if kept == bq * bk:  # a block cut by the sequence end is partial for Flex too
                full += 1
            elif kept:
                partial += 1
    return partial, full


def _table_head(peers, extra):
    """A results table's header and separator: case, one column per peer, then `extra` columns."""
    cols = ["case", *peers, *extra]
    return ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]


def _missing_row(r, n_cells):
    """A case that has no results: dashes, its reason in the last column."""
    return f"| {r['case']} | " + " | ".join("-" for _ in range(n_cells)) + f" | {r.get('missing', '')} |"


def _error_cell(x):
    """A peer that did not run: left out by --exclude, crashed (broke a worker) or an error of its own."""
    return ("left out" if x["error"].startswith(LEFT_OUT) else "crashed") if x.get("excluded") else "err"


def _cell(x):
    if x is None:
        return "-"
    if "error" in x:
        return _error_cell(x)
    if "na" in x:
        return "n/a"
    if "wrong" in x:
        return "wrong output"
    if x.get("ms") is None:
        return "-"
    return f"{x['tflops']:.0f} ({x['ms']:.3f})" + ("*" if x.get("variant") else "")


def absent_lines(meta):
    """The peers the worker could not load (their columns '-'), each with its reason."""
    absent = meta.get("absent") or {}
    return ["Absent peers (column '-'): " + "; ".join(f"{p}: {why}" for p, why in sorted(absent.items())) + "."] \
        if absent else []


def markdown(meta, rows):
    copy = meta.get("copy") or {}
    lines = [f"# Forward, fastattn vs peers ({meta.get('device')}, {meta.get('date')}, "
             f"commit {meta.get('commit')})", "",
             f"TFLOPS (ms), ms the median over {meta.get('rounds')} rounds; each round times every peer once in a "
             f"rotated order, a time being the median of {meta.get('reps')} CUDA-event timings after "
             f"{meta.get('warmup')} warm-ups ({meta.get('timing')}).",
             f"FLOPs = {FLOPS_RULE}.",
             "ratio = sdpa-cudnn ms / fastattn ms per round (> 1: fastattn faster), median over rounds; "
             "spread = its min-max over rounds; ratio bhsd = the same against cudnn-bhsd.",
             "MHz = median SM clock (NVML) during fastattn's / cuDNN's timed calls; cycle ratio = (cuDNN ms x MHz) / "
             "(fastattn ms x MHz) per round, median: the ratio at equal clocks (the chip is power-capped, "
             "so a kernel's clock is part of its speed; docs/notes/bench-power.md).",
             "Inputs: every peer reads fastattn's (b, s, h, d) memory (torch peers through transposed views); "
             "cudnn-bhsd = cuDNN on contiguous (b, h, s, d) copies, the layout of the runs up to 5ebca72. "
             "GQA: SDPA peers get K/V expanded to h_q heads.",
             f"maxdiff = max |fastattn - peer| of out; above {TOL} a peer is wrong output and not timed "
             "(details below). * = Flex on contiguous copies (its first try was wrong).",
             f"Copy bandwidth: {copy.get('gbps', float('nan')):.0f} GB/s (1 GiB device-to-device copy, bytes read + "
             f"written / time, median of {copy.get('reps', '?')})." if copy else "Copy bandwidth: not measured.",
             "fa3 ratio = sdpa-cudnn ms / fa3 ms per round, median (FlashAttention-3 built from its public source "
             "by bench/fa3/build.sh: the bar of issue #3); vs fa3 = fa3 ms / fastattn ms per round, median "
             "(> 1: fastattn faster); vs ffpa likewise with FFPA's ms.",
             *absent_lines(meta),
             ""] + _table_head(PEERS, ["ratio", "spread", "ratio bhsd", "fa3 ratio", "vs fa3", "vs ffpa", "MHz",
                                       "cycle ratio", "maxdiff"])
    notes = []
    for r in rows:
        if "results" not in r:
            lines.append(_missing_row(r, len(PEERS) + 8))
            continue
        res = r["results"]
        q, qb = r.get("ratio"), r.get("ratio_bhsd")
        md = " ".join(f"{p.replace('sdpa-', '')}:{x['maxdiff']:.1e}" for p, x in res.items()
                      if x.get("maxdiff") is not None)
        cells = [_cell(res.get(p)) for p in PEERS]
        cells.append(f"{q['median']:.2f}" if q else "-")
        cells.append(f"{q['min']:.2f}-{q['max']:.2f}" if q else "-")
        cells.append(f"{qb['median']:.2f}" if qb else "-")
        for name in ("ratio_fa3", "vs_fa3", "vs_ffpa"):
            cells.append(f"{r[name]['median']:.2f}" if r.get(name) else "-")
        mhz = [res.get(p, {}).get("mhz") for p in ("fastattn", BASELINE)]
        cells.append(" / ".join(f"{m:.0f}" if m else "-" for m in mhz) if any(mhz) else "-")
        cyc = r.get("cycle_ratio")
        cells.append(f"{cyc['median']:.2f}" if cyc else "-")
        lines.append(f"| {r['case']} | " + " | ".join(cells) + f" | {md} |")
        for p, x in res.items():
            if "error" in x:
                notes.append(f"- {r['case']} · {p}: {x['error']}")
            if "na" in x:
                notes.append(f"- {r['case']} · {p}: n/a: {x['na']}")
            if "wrong" in x:
                again = f" (also on {x['variant']}; first try: {x['first_try']})" if x.get("variant") else ""
                notes.append(f"- {r['case']} · {p}: wrong output: {x['wrong']}{again}")
            elif x.get("variant"):
                notes.append(f"- {r['case']} · {p}: timed on {x['variant']}; first try: {x.get('first_try', '')}")
    local = [r for r in rows if r.get("local") and "results" in r]
    if local and copy:
        lines += ["", f"Sliding window vs the HBM floor (floor = bytes of q, k, v, o / copy bandwidth; target: "
                  f"fastattn <= {FLOOR_TARGET} x floor)", "",
                  "| case | MB (q,k,v,o) | floor ms | fastattn ms | fastattn / floor | spread | flex ms |",
                  "|---|---|---|---|---|---|---|"]
        for r in local:
            ours, fl = r["results"].get("fastattn", {}), r["results"].get("flex", {})
            floor = r["floor_ms"]
            cells = [r["case"], f"{r['bytes'] / 1e6:.0f}", f"{floor:.4f}"]
            if ours.get("ms"):
                ms_r = [t for t in ours["ms_rounds"] if t]
                cells += [f"{ours['ms']:.4f}", f"{ours['ms'] / floor:.2f}",
                          f"{min(ms_r) / floor:.2f}-{max(ms_r) / floor:.2f}"]
            else:
                cells += ["-", "-", "-"]
            cells.append(f"{fl['ms']:.4f}" if fl.get("ms") else _cell(fl or None))
            lines.append("| " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "Failures, refusals (n/a), wrong outputs, variants:", ""] + notes
    return "\n".join(lines) + "\n"


# --- backward mode: its plan and table (no torch needed) ----------------------------------------

BWD_PEERS = ("fastattn", "fastattn-det", "fa3", "fa3-det", "fa4", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "flex")
BWD_FLOPS_FACTOR = 2.5  # backward FLOPs = 2.5 x forward (five matmuls against the forward's two)
BWD_TOL = 0.05          # max |grad - fastattn's| / max(1, max |fastattn's|) above which a peer is wrong
BWD_FLOOR_TARGET = 1.5  # local rows: fastattn's backward within 1.5x of its HBM floor (issue #29)


def bwd_cases(preset="full", smoke=False):
    """Backward case dicts in run order; det=True adds the deterministic peers to a case."""
    out = []

    def add(name, b, s, h, hkv, d, causal=False, window=(-1, -1), dtype="bfloat16", det=False, dv=None):
        out.append(dict(name=name, b=b, s=s, h=h, hkv=hkv, d=d, dv=dv or d, causal=causal, window=list(window),
                        dtype=dtype, det=det))
    mask = {False: "full", True: "causal"}
    if preset == "dv" and not smoke:
        dv_cases(add, mask.get)
        return out
    if smoke:
        for causal in (False, True):
            add(f"dense d64 s256 {mask[causal]}", 2, 256, 2, 2, 64, causal, det=True)
        add("gqa b1 s256 h4/2 d128 fp16", 1, 256, 4, 2, 128, dtype="float16")
        add("local(64,0) d128 s512", 1, 512, 2, 2, 128, window=(64, 0))
        return out
    for causal in (False, True):
        add(f"dense d128 s8192 {mask[causal]}", 2, 8192, 16, 16, 128, causal, det=True)
    # (d, s, b, h): b*s = 16k tokens, hidden 2048 (h = 2048 / d), as the forward's presets
    shapes = [(128, 4096, 4, 16), (64, 4096, 4, 32), (256, 4096, 4, 8)] if preset == "full" else [(64, 4096, 4, 32)]
    shapes += [(d, 1024, 16, 2048 // d) for d in ((64, 128, 256) if preset == "full" else (128,))]
    for d, s, b, h in shapes:
        for causal in (False, True):
            add(f"dense d{d} s{s} {mask[causal]}", b, s, h, h, d, causal)
    for causal in (False, True) if preset == "full" else (False,):
        add(f"gqa b4 s4096 h64/8 d128 fp16 {mask[causal]}", 4, 4096, 64, 8, 128, causal, dtype="float16")
    add("local(64,0) d128 s8192", 2, 8192, 16, 16, 128, window=(64, 0))
    return out


def applicable_bwd(c, peer, smoke=False):
    """Whether a backward peer can run the case at all (else a '-' cell)."""
    if peer.endswith("-det"):
        return c.get("det", False) and (peer != "fa3-det" or not smoke)
    if peer == "flex":  # a forward + backward compile per case: the headline shapes only (no CPU backward)
        return not smoke and ((c["d"] == 128 and c["s"] == 8192) or is_local(c) or (c["h"] != c["hkv"] and not c["causal"])
                              or v_dim(c) != c["d"])
    return applicable(c, peer, smoke)


def bwd_flops(c):
    return BWD_FLOPS_FACTOR * case_flops(c)


def bwd_bytes(c):
    """Bytes the backward must move through HBM (2-byte dtypes): q, k, v, o, dO and the float32
    lse in; dq, dk, dv out (q, k, dq, dk at d; v, o, dO, dv at d_v)."""
    b, s, h, hkv, d, dv = c["b"], c["s"], c["h"], c["hkv"], c["d"], v_dim(c)
    return 2 * b * s * (d + dv) * (2 * h + 2 * hkv) + 4 * b * h * s


def _bwd_cell(x, key="ms"):
    if x is None:
        return "-"
    if "error" in x and x.get(key) is None:
        return _error_cell(x)
    if "na" in x:
        return "n/a"
    if "wrong" in x:
        return "wrong grads"
    if x.get(key) is None:
        return "-"
    if key == "ms":
        return f"{x['tflops']:.0f} ({x['ms']:.3f})"
    return f"{x[key]:.3f}"


def markdown_bwd(meta, rows):
    copy = meta.get("copy") or {}
    lines = [f"# Backward, fastattn vs peers ({meta.get('device')}, {meta.get('date')}, commit {meta.get('commit')})",
             "",
             f"Backward TFLOPS (ms): FLOPs = {BWD_FLOPS_FACTOR} x forward ({FLOPS_RULE}). ms the median over "
             f"{meta.get('rounds')} rounds of the median of {meta.get('reps')} CUDA-event timings after "
             f"{meta.get('warmup')} warm-ups ({meta.get('timing')}).",
             "fastattn (C ABI), fastattn-det (deterministic=1), fa3 and fa3-det (bench/fa3, FA3's own backward "
             "kernels, fed fastattn's out and lse) time the backward call itself; the torch peers (SDPA backends, "
             "Flex) expose only autograd: their backward = (forward + backward) - forward, each timed with grad on.",
             "ratio = sdpa-cudnn ms / fastattn ms per round, median (> 1: fastattn faster); vs fa3 = fa3 ms / "
             "fastattn ms; fa3 ratio = sdpa-cudnn ms / fa3 ms; det cost = fastattn-det ms / fastattn ms "
             "(target <= 1.15); fa3 det cost likewise. GQA: SDPA peers get K/V expanded to h_q heads.",
             f"maxdiff = max over dq, dk, dv of max |peer - fastattn| / max(1, max |fastattn|); above {BWD_TOL} a peer "
             "is wrong grads and not timed. fwd+bwd ms: fastattn = its forward + backward, torch peers timed together.",
             *absent_lines(meta),
             ""] + _table_head(BWD_PEERS, ["ratio", "spread", "vs fa3", "fa3 ratio", "det cost", "fa3 det cost",
                                           "fwd+bwd ms (fastattn / cudnn / fa3)", "maxdiff"])
    notes = []
    for r in rows:
        if "results" not in r:
            lines.append(_missing_row(r, len(BWD_PEERS) + 7))
            continue
        res = r["results"]
        cells = [_bwd_cell(res.get(p)) for p in BWD_PEERS]
        q = r.get("ratio")
        cells += [f"{q['median']:.2f}" if q else "-", f"{q['min']:.2f}-{q['max']:.2f}" if q else "-"]
        for name in ("vs_fa3", "ratio_fa3", "det_cost", "fa3_det_cost"):
            cells.append(f"{r[name]['median']:.2f}" if r.get(name) else "-")
        cells.append(" / ".join(_bwd_cell(res.get(p), "fwdbwd_ms") for p in ("fastattn", BASELINE, "fa3")))
        cells.append(" ".join(f"{p.replace('sdpa-', '')}:{x['maxdiff']:.1e}" for p, x in res.items()
                              if x.get("maxdiff") is not None))
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " |")
        for p, x in res.items():
            if "error" in x:
                notes.append(f"- {r['case']} · {p}: {x['error']}")
            if "na" in x:
                notes.append(f"- {r['case']} · {p}: n/a: {x['na']}")
            if "wrong" in x:
                notes.append(f"- {r['case']} · {p}: wrong gradients: {x['wrong']}")
    local = [r for r in rows if r.get("local") and "results" in r]
    if local and copy:
        lines += ["", f"Sliding window backward vs the HBM floor (floor = bytes of q, k, v, o, dO, lse in and dq, dk, "
                  f"dv out / copy bandwidth {copy.get('gbps', float('nan')):.0f} GB/s; target: fastattn <= "
                  f"{BWD_FLOOR_TARGET} x floor)", "",
                  "| case | MB | floor ms | fastattn ms | fastattn / floor | fa3 ms | flex ms |", "|---|---|---|---|---|---|---|"]
        for r in local:
            ours = r["results"].get("fastattn", {})
            floor = r["floor_ms"]
            cells = [r["case"], f"{r['bytes'] / 1e6:.0f}", f"{floor:.4f}",
                     f"{ours['ms']:.4f}" if ours.get("ms") else "-",
                     f"{ours['ms'] / floor:.2f}" if ours.get("ms") else "-"]
            cells += [f"{r['results'].get(p, {}).get('ms'):.4f}" if r["results"].get(p, {}).get("ms") else "-"
                      for p in ("fa3", "flex")]
            lines.append("| " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "Failures, refusals (n/a) and wrong gradients:", ""] + notes
    return "\n".join(lines) + "\n"


# --- the worker: everything that touches torch and the GPU ------------------------------------

class FaTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("stride", ctypes.c_int64 * 4), ("dtype", ctypes.c_int32), ("device", ctypes.c_int32),
                ("device_index", ctypes.c_int32)]


class FaBlockMask(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4),
                ("device", ctypes.c_int32), ("device_index", ctypes.c_int32), ("block_q", ctypes.c_int32),
                ("block_k", ctypes.c_int32)]


class FaBitMask(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 3),
                ("device", ctypes.c_int32), ("device_index", ctypes.c_int32)]


class FaArgs(ctypes.Structure):
    _fields_ = [("q", FaTensor), ("k", FaTensor), ("v", FaTensor), ("out", FaTensor), ("lse", FaTensor),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
                ("cu_seqlens_size", ctypes.c_int64), ("seqused_q", ctypes.c_void_p),
                ("seqused_k", ctypes.c_void_p), ("max_seqlen_q", ctypes.c_int32),
                ("max_seqlen_k", ctypes.c_int32), ("check_index_arrays", ctypes.c_int32),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int32), ("window_left", ctypes.c_int32),
                ("window_right", ctypes.c_int32), ("softcap", ctypes.c_float), ("backend", ctypes.c_int32),
                ("num_threads", ctypes.c_int32),
                ("deterministic", ctypes.c_int32), ("num_splits", ctypes.c_int32),
                # every field, even unused: fastattn_args_init writes sizeof(fastattn_args) bytes
                ("block_mask", FaBlockMask), ("bit_mask", FaBitMask),
                ("bias", FaTensor), ("dbias", FaTensor), ("alibi_slopes", FaTensor)]  # c_api.h's order (ABI 2)


FA_ABI_VERSION = 3  # c_api.h's FASTATTN_ABI_VERSION of the layout FaArgs spells (3 changed only the kvcache struct)


class FastAttn:
    DT = {"float16": 0, "bfloat16": 1, "float32": 2}

    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)
        # A newer layout would read past our FaArgs; an older one reads a prefix of it (fields only append), so
        # an older library (an A/B's base) works as long as the fields it lacks are left unset (self.abi says).
        self.abi = self.lib.fastattn_abi_version()
        if self.abi > FA_ABI_VERSION:
            raise RuntimeError(f"{lib_path}: C ABI {self.abi}, newer than bench/run-peers.py's FaArgs "
                               f"(ABI {FA_ABI_VERSION}): extend FaArgs")
        self.lib.fastattn_forward.argtypes = [ctypes.POINTER(FaArgs), ctypes.c_void_p]
        self.lib.fastattn_backward.argtypes = [ctypes.POINTER(FaArgs)] + [ctypes.POINTER(FaTensor)] * 4 + [
            ctypes.c_void_p]
        self.lib.fastattn_last_error.restype = ctypes.c_char_p
        self.lib.fastattn_args_init.argtypes = [ctypes.POINTER(FaArgs)]

    def _tensor(self, t):
        ft = FaTensor()
        ft.data = t.data_ptr()
        ft.ndim = t.dim()
        for i in range(t.dim()):
            ft.shape[i] = t.shape[i]
            ft.stride[i] = t.stride(i)
        ft.dtype = self.DT[str(t.dtype).replace("torch.", "")]
        ft.device = 1 if t.is_cuda else 0
        ft.device_index = t.device.index or 0
        return ft

    def forward_fn(self, torch, q, k, v, causal, window, num_splits=0):
        """A no-argument callable running our forward on (b, s, h, d) tensors on the stream current
        now; returns out (v's head dim). num_splits: 0 = the heuristic (fastattn_args_init's)."""
        out = q.new_empty(*q.shape[:3], v.shape[-1])
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device, dtype=torch.float32)
        a = FaArgs()
        self.lib.fastattn_args_init(ctypes.byref(a))
        a.q, a.k, a.v, a.out, a.lse = (self._tensor(t) for t in (q, k, v, out, lse))
        a.num_splits = num_splits
        a.causal = int(causal)
        a.window_left, a.window_right = window
        a.backend = 2 if q.is_cuda else 1
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream if q.is_cuda else None)
        ref = ctypes.byref(a)

        def run():
            if self.lib.fastattn_forward(ref, stream) != 0:
                raise RuntimeError(self.lib.fastattn_last_error().decode())
            return out
        # The struct holds raw pointers: every tensor it names must live as long as run. The old
        # bench kept only out, so lse was freed on return and every call wrote b*h*s floats into
        # memory the caching allocator had handed on. In the d128 cases lse is 1 MiB, a small-pool
        # block like the index tensors of Flex's BlockMask made right after: Flex then read our
        # LSE as block counts and indices (wrong causal rows, the crash at local d128; local d64,
        # lse 2 MiB in the large pool, was right).
        run.tensors = (q, k, v, out, lse)
        run.lse = lse
        return run

    def backward_fn(self, torch, q, k, v, out, lse, dout, causal, window, deterministic=False):
        """A no-argument callable running our backward; returns (dq, dk, dv)."""
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        a = FaArgs()
        self.lib.fastattn_args_init(ctypes.byref(a))
        a.q, a.k, a.v, a.out, a.lse = (self._tensor(t) for t in (q, k, v, out, lse))
        a.causal = int(causal)
        a.window_left, a.window_right = window
        a.backend = 2 if q.is_cuda else 1
        a.deterministic = int(deterministic)
        grads = [self._tensor(t) for t in (dout, dq, dk, dv)]
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream if q.is_cuda else None)
        refs = [ctypes.byref(a)] + [ctypes.byref(g) for g in grads]

        def run():
            if self.lib.fastattn_backward(*refs, stream) != 0:
                raise RuntimeError(self.lib.fastattn_last_error().decode())
            return dq, dk, dv
        run.tensors = (q, k, v, out, lse, dout, dq, dk, dv)  # the structs' raw pointers must stay valid
        return run


class Fa3Args(ctypes.Structure):
    """bench/fa3/fa3_peer.cu's Fa3Args."""
    _fields_ = [("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("out", ctypes.c_void_p),
                ("lse", ctypes.c_void_p), ("semaphore", ctypes.c_void_p), ("q_stride", ctypes.c_int64 * 3),
                ("k_stride", ctypes.c_int64 * 3), ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3)] + [
                (n, ctypes.c_int32) for n in ("b", "s_q", "s_k", "h", "h_k", "d", "bf16", "causal", "window_left",
                                              "window_right", "num_sm")] + [
                ("scale", ctypes.c_float), ("d_v", ctypes.c_int32)]  # d_v last: libraries built before it still fit


class Fa3:
    """FlashAttention-3's forward through bench/fa3/libfa3peer.so (bench/fa3/build.sh builds it from
    FA3's public source), on the same (b, s, h, d) memory as fastattn."""

    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)  # built with FA3_PARTS=fwd, bwd or all: either entry may be absent
        self.has_forward, self.has_backward = hasattr(self.lib, "fa3_forward"), hasattr(self.lib, "fa3_backward")
        if self.has_forward:
            self.lib.fa3_forward.argtypes = [ctypes.POINTER(Fa3Args), ctypes.c_void_p]
            self.lib.fa3_last_error.restype = ctypes.c_char_p
        if self.has_backward:
            self.lib.fa3_backward.argtypes = [ctypes.POINTER(Fa3BwdArgs), ctypes.c_void_p]
            self.lib.fa3_backward_workspace_bytes.argtypes = [ctypes.POINTER(Fa3BwdArgs)]
            self.lib.fa3_backward_workspace_bytes.restype = ctypes.c_int64
            self.lib.fa3_bwd_last_error.restype = ctypes.c_char_p

    def backward_fn(self, torch, q, k, v, out, lse, dout, causal, window, deterministic=False):
        """FA3's backward on fastattn's (out, lse) (the same layouts and natural-log LSE)."""
        if not self.has_backward:
            raise NotApplicable()
        b, s_q, h, d = q.shape
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        a = Fa3BwdArgs()
        a.d_v = v.shape[-1]
        a.q, a.k, a.v, a.out, a.dout, a.lse, a.dq, a.dk, a.dv = (
            t.data_ptr() for t in (q, k, v, out, dout, lse, dq, dk, dv))
        for name, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", out), ("do_stride", dout),
                        ("dq_stride", dq), ("dk_stride", dk), ("dv_stride", dv)):
            getattr(a, name)[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.b, a.s_q, a.s_k, a.h, a.h_k, a.d = b, s_q, k.shape[1], h, k.shape[2], d
        a.bf16 = int(q.dtype == torch.bfloat16)
        a.causal = int(causal)
        a.window_left, a.window_right = window
        a.deterministic = int(deterministic)
        a.num_sm = torch.cuda.get_device_properties(q.device).multi_processor_count
        a.scale = d ** -0.5
        ws = torch.empty(self.lib.fa3_backward_workspace_bytes(ctypes.byref(a)), dtype=torch.uint8, device=q.device)
        a.workspace = ws.data_ptr()
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        ref = ctypes.byref(a)

        def run():
            if self.lib.fa3_backward(ref, stream) != 0:
                raise RuntimeError(self.lib.fa3_bwd_last_error().decode())
            return dq, dk, dv
        run.tensors = (q, k, v, out, lse, dout, dq, dk, dv, ws)
        return run

    def forward_fn(self, torch, q, k, v, causal, window):
        if not self.has_forward:
            raise NotApplicable()
        b, s_q, h, d = q.shape
        out = q.new_empty(b, s_q, h, v.shape[-1])
        lse = torch.empty(b, h, s_q, device=q.device, dtype=torch.float32)
        sem = torch.zeros(1, device=q.device, dtype=torch.int32)
        a = Fa3Args()
        a.d_v = v.shape[-1]
        a.q, a.k, a.v, a.out, a.lse, a.semaphore = (t.data_ptr() for t in (q, k, v, out, lse, sem))
        for name, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", out)):
            getattr(a, name)[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.b, a.s_q, a.s_k, a.h, a.h_k, a.d = b, s_q, k.shape[1], h, k.shape[2], d
        a.bf16 = int(q.dtype == torch.bfloat16)
        a.causal = int(causal)
        a.window_left, a.window_right = window
        a.num_sm = torch.cuda.get_device_properties(q.device).multi_processor_count
        a.scale = d ** -0.5
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        ref = ctypes.byref(a)

        def run():
            if self.lib.fa3_forward(ref, stream) != 0:
                raise RuntimeError(self.lib.fa3_last_error().decode())
            return out
        run.tensors = (q, k, v, out, lse, sem)  # the struct's raw pointers must stay valid
        return run


class Fa3BwdArgs(ctypes.Structure):
    """bench/fa3/fa3_bwd_peer.cu's Fa3BwdArgs."""
    _fields_ = [(n, ctypes.c_void_p) for n in ("q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv", "workspace")] + [
                (n, ctypes.c_int64 * 3) for n in ("q_stride", "k_stride", "v_stride", "o_stride", "do_stride",
                                                  "dq_stride", "dk_stride", "dv_stride")] + [
                (n, ctypes.c_int32) for n in ("b", "s_q", "s_k", "h", "h_k", "d", "bf16", "causal", "window_left",
                                              "window_right", "deterministic", "num_sm")] + [
                ("scale", ctypes.c_float), ("d_v", ctypes.c_int32)]


def keep_mod(sq, sk, causal, window):
    """Flex mask_mod of the case, bottom-right aligned like fastattn; None for dense."""
    w = window_of(causal, window)
    if w is None:
        return None
    left, right = w
    offset = sk - sq

    def keep(b, h, q_idx, kv_idx):
        rel = kv_idx - q_idx - offset  # key position relative to the query's diagonal
        if right >= 0 and left >= 0:
            return (rel <= right) & (rel >= -left)
        return rel <= right if right >= 0 else rel >= -left
    return keep


class Fa4:
    """FlashAttention-4 through its own Python API (flash_attn.cute, the CuTe-DSL wheel
    flash-attn-4): the forward _flash_attn_fwd and the backward _flash_attn_bwd, each called as
    its autograd function calls it, so the backward's time is the kernel's alone. Kernels are
    compiled on first use (JIT), inside the untimed check."""

    def __init__(self, site_dir):
        import site
        if site_dir:
            site.addsitedir(site_dir)  # reads the DSL's .pth files, which a PYTHONPATH entry would not
        from flash_attn.cute import interface
        self.api = interface

    @staticmethod
    def load(site_dir):
        """(Fa4 or None, the reason it is absent)."""
        try:
            return Fa4(site_dir), None
        except Exception as e:  # noqa: BLE001 - a missing or broken wheel only empties the column
            return None, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"

    @staticmethod
    def _window(causal, window):
        """FA4's (left, right): None for an unbounded side; causal is its own flag."""
        left, right = window
        return (None if left < 0 else left), (None if right < 0 else right)

    def forward_fn(self, torch, q, k, v, causal, window):
        left, right = self._window(causal, window)
        scale = q.shape[-1] ** -0.5

        def run():
            out, lse = self.api._flash_attn_fwd(q, k, v, softmax_scale=scale, causal=causal,
                                                window_size_left=left, window_size_right=right, return_lse=True)[:2]
            run.lse = lse
            return out
        return run

    def backward_fn(self, torch, q, k, v, dout, causal, window):
        """(fwd, bwd): FA4's own forward (its out and lse feed its backward) and the backward."""
        fwd = self.forward_fn(torch, q, k, v, causal, window)
        out = fwd()
        lse = fwd.lse
        left, right = self._window(causal, window)

        def run():
            dq, dk, dv = self.api._flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale=q.shape[-1] ** -0.5,
                                                  causal=causal, window_size_left=left, window_size_right=right)[:3]
            return dq, dk, dv
        run.tensors = (out, lse)
        return fwd, run


class Ffpa:
    """FFPA (ffpa_attn, the wheel ffpa-attn: split-D attention for head dims 320-1024 on the CuTe DSL)
    through its dense CuTe-DSL op torch.ops.ffpa_attn._fwd_cute, on fastattn's (b, s, h, d) memory:
    that op reads [B, N, H, D], its kernels' own layout (the public ffpa_attn_func takes SDPA's
    [B, H, N, D] and only re-views it as [B, N, H, D]), so no copy and no transpose is timed. The op
    picks the kernel as the public path does: on sm90 the Hopper kernels for d 320-512, the SM80
    split-D kernel above 512. Shapes are checked first by FFPA's own _require_cute_supported (d in
    320-1024, a multiple of 32 above 512, d_v = d, fp16 / bf16): what it refuses is an n/a cell.
    Kernels compile on first use (JIT, in-process cache only), inside the untimed check."""

    def __init__(self, site_dir):
        import site
        if site_dir:
            site.addsitedir(site_dir)  # reads nvidia-cutlass-dsl's .pth, which a PYTHONPATH entry would not
        # ffpa_attn.cute itself: the package's own __init__ swallows the backend's import error (and
        # then falls back to other backends), which would hide why the column is empty
        import ffpa_attn.cute as cute
        self.cute = cute

    @staticmethod
    def load(site_dir):
        """(Ffpa or None, the reason it is absent)."""
        try:
            return Ffpa(site_dir), None
        except Exception as e:  # noqa: BLE001 - a missing or broken wheel only empties the column
            return None, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"

    def forward_fn(self, torch, q, k, v, causal):
        try:
            self.cute._require_cute_supported(q, k, v, requires_grad=False)
        except (NotImplementedError, TypeError, ValueError) as e:
            raise Refused(f"FFPA: {(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}") from None
        op = torch.ops.ffpa_attn._fwd_cute  # registered by importing ffpa_attn.cute
        scale = q.shape[-1] ** -0.5

        def run():
            return op(q, k, v, scale, int(causal), 0)[0]  # (out [B, N, H, D], an empty lse)
        return run


class Worker:
    def __init__(self, args):
        import torch
        self.torch = torch
        self.args = args
        self.cuda = not args.smoke_cpu
        self.dev = "cuda" if self.cuda else "cpu"
        self.fa = FastAttn(args.lib)
        self.fa3 = Fa3(args.fa3_lib) if args.fa3_lib and os.path.exists(args.fa3_lib) and self.cuda else None
        self.fa4, why = Fa4.load(args.fa4_site) if self.cuda else (None, "no GPU (smoke run)")
        if self.fa4 is None and args.start == 0:
            print(f"fa4: column skipped ({why}; pip install flash-attn-4 and pass --fa4-site)", flush=True)
        self.events = open(args.events, "a")
        if self.fa4 is None:
            self.emit(type="absent", peer="fa4", why=why)
        # FFPA is imported at the first case it applies to (d >= 320): its import patches Triton's
        # autotuner process-wide, which the runs without such cases (Flex) should not see
        self.ffpa, self.ffpa_why = None, None
        self.excluded = dict(e.split("=", 1) for e in args.exclude)  # "case:peer" -> reason
        self.flush = (torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
                      if self.cuda and not args.no_flush else None)
        self.spin = self.cuda and hasattr(torch.cuda, "_sleep")
        self.nvml = Nvml(self.pci_bus_id()) if self.cuda else None
        self.mhz = None  # median SM clock of the last measurement
        config = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit"):  # Flex: a compile per case and variant
            if hasattr(config, name):
                setattr(config, name, max(getattr(config, name), 256))

    def load_ffpa(self):
        """FFPA's peer object, imported on first use; None (its column '-', the reason printed and
        recorded once) when the wheel is missing or does not import."""
        if self.ffpa is None and self.ffpa_why is None:
            self.ffpa, why = Ffpa.load(self.args.ffpa_site) if self.cuda else (None, "no GPU (smoke run)")
            if self.ffpa is None:
                self.ffpa_why = why
                print(f"ffpa: column skipped ({why}; pip install ffpa-attn and its deps with --target, pass "
                      f"--ffpa-site)", flush=True)
                self.emit(type="absent", peer="ffpa", why=why)
        return self.ffpa

    def emit(self, **event):
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()  # a crash right after still leaves this line for the driver

    def context_lost(self):
        if not self.cuda:
            return False
        try:
            self.torch.cuda.synchronize()
            return False
        except Exception:  # noqa: BLE001 - any failure here means the context is gone
            return True

    def lost(self, i, peer, error):
        """The CUDA context is gone: record who broke it and leave; the driver restarts us."""
        self.emit(type="lost", case=i, peer=peer, error=error)
        print(f"  CUDA context lost at {peer}: {error}; worker exits for a restart", flush=True)
        self.events.close()
        os._exit(EXIT_LOST)

    def pci_bus_id(self):
        p = self.torch.cuda.get_device_properties(self.torch.cuda.current_device())
        if not hasattr(p, "pci_bus_id"):
            return None
        return f"{getattr(p, 'pci_domain_id', 0):08x}:{p.pci_bus_id:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"

    # -- timing --
    def time_ms(self, fn):
        torch, reps, warmup = self.torch, self.args.reps, self.args.warmup
        self.mhz = None
        if not self.cuda:
            for _ in range(warmup):
                fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times)
        if self.args.cooldown_ms > 0:
            torch.cuda.synchronize()
            time.sleep(self.args.cooldown_ms / 1e3)  # every peer starts from the same power state
        host = []
        for _ in range(warmup):
            t0 = time.perf_counter()
            fn()
            host.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        if self.spin:
            # Keep the GPU busy while the host queues all reps (flush, events, the call): without
            # it each call's host work would run while the start event waits on an idle GPU.
            per_call = (statistics.median(host) if host else 1e-4) + 30e-6
            torch.cuda._sleep(int(min(0.05, 1.5 * reps * per_call + 1e-4) * SPIN_HZ))
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for s, e in ev:
            if self.flush is not None:
                self.flush.zero_()
            s.record()
            fn()
            e.record()
        self.mhz = self.sample_clock(ev[0][0], ev[-1][1])
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in ev)

    def sample_clock(self, first, last):
        """Median of NVML's SM clock read every ~0.5 ms from the first timed call's start to the last
        one's end; None without NVML."""
        if self.nvml is None or self.nvml.handle is None:
            return None
        while not first.query():  # the spin and the queue ahead of it are not sampled
            time.sleep(0.0002)
        mhz = []
        while True:
            done = last.query()
            m = self.nvml.sm_mhz()
            if m:
                mhz.append(m)
            if done:
                break
            time.sleep(0.0005)
        return statistics.median(mhz) if mhz else None

    def copy_bandwidth(self, reps=10):
        torch = self.torch
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
        src.fill_(7)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for s, e in ev:
            s.record()
            dst.copy_(src)
            e.record()
        torch.cuda.synchronize()
        ms = statistics.median(s.elapsed_time(e) for s, e in ev)
        del src, dst
        torch.cuda.empty_cache()
        return dict(bytes=COPY_BYTES, ms=ms, gbps=2 * COPY_BYTES / ms / 1e6, reps=reps)

    # -- peers --
    def prepare(self, peer, c, x):
        torch = self.torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = x["bshd"]
        if peer == "fastattn":
            return self.fa.forward_fn(torch, q, k, v, c["causal"], tuple(c["window"]))
        if not applicable(c, peer, self.args.smoke_cpu) or (peer == "fa3" and self.fa3 is None) or (
                peer == "fa4" and self.fa4 is None) or (peer == "ffpa" and self.load_ffpa() is None):
            raise NotApplicable()
        if peer == "fa3":
            return self.fa3.forward_fn(torch, q, k, v, c["causal"], tuple(c["window"]))
        if peer == "fa4":
            return self.fa4.forward_fn(torch, q, k, v, c["causal"], tuple(c["window"]))
        if peer == "ffpa":
            return self.ffpa.forward_fn(torch, q, k, v, c["causal"])
        if peer == "flex":
            return self.flex_fn(c, *x["bhsd"])
        backend = {"sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
                   "sdpa-efficient": "EFFICIENT_ATTENTION", "cudnn-bhsd": "CUDNN_ATTENTION"}[peer]
        if not self.cuda:
            backend = "MATH"  # smoke run on the CPU: the pipeline, not the backends
        backend = getattr(SDPBackend, backend)
        q4, k4, v4 = x["sdpa_bhsd"]
        if peer == "cudnn-bhsd":
            q4, k4, v4 = (t.contiguous() for t in (q4, k4, v4))
        sdpa, causal = torch.nn.functional.scaled_dot_product_attention, c["causal"]

        def run():
            with sdpa_kernel(backend):
                return sdpa(q4, k4, v4, is_causal=causal)
        self.sdpa_refusal(run)
        run.layout = "bhsd"
        return run

    def sdpa_refusal(self, fn):
        """Calls fn once; when SDPA has no kernel for the shape under the chosen backend (d_v != d for
        its flash backend, say), raises Refused with the reasons PyTorch warns of. Other errors pass."""
        import warnings
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                fn()
                return
            except RuntimeError as e:
                if "No available kernel" not in str(e):
                    raise
        why = [" ".join(str(w.message).split()) for w in seen]
        raise Refused("; ".join(dict.fromkeys(why)) or "SDPA: no available kernel")

    def flex_fn(self, c, q4, k4, v4, contiguous=False):
        torch = self.torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        # A fresh compile per case: no graph, guard or captured BlockMask of an earlier shape (the
        # old bench shared one compiled Flex across all cases) can serve this one.
        torch._dynamo.reset()
        compiled = torch.compile(flex_attention, dynamic=False)
        keep = keep_mod(c["s"], c["s"], c["causal"], tuple(c["window"]))
        bm = None if keep is None else create_block_mask(keep, None, None, c["s"], c["s"], device=q4.device)
        if contiguous:
            q4, k4, v4 = (t.contiguous() for t in (q4, k4, v4))
        gqa = c["h"] != c["hkv"]

        def run():
            return compiled(q4, k4, v4, block_mask=bm, enable_gqa=gqa)
        run.layout = "bhsd"
        run.block_mask = bm
        return run

    def block_mask_note(self, c, bm):
        """Flex's block counts against the mask's own: tells a wrong BlockMask from a wrong kernel."""
        if bm is None:
            return "no block mask (dense)"
        try:
            part = int(bm.kv_num_blocks.sum())
            full = int(bm.full_kv_num_blocks.sum()) if bm.full_kv_num_blocks is not None else 0
            bq, bk = bm.BLOCK_SIZE
            want = block_classes(c["s"], c["s"], c["causal"], tuple(c["window"]), bq, bk)
            return (f"BlockMask {tuple(bm.kv_num_blocks.shape)} blocks {bq}x{bk}: {part} partial + {full} full "
                    f"(the mask has {want[0]} + {want[1]}{', matches' if (part, full) == want else ', MISMATCH'})")
        except Exception as e:  # noqa: BLE001 - a note, never a failure
            return f"BlockMask not inspected ({type(e).__name__}: {e})"

    def compare(self, ours, out):
        """max |diff| and, when over TOL, where: worst (b, i, h), wrong query rows, zero rows."""
        torch = self.torch
        diff = torch.nan_to_num((ours - out).abs(), nan=float("inf"))
        row = diff.amax(dim=-1)  # (b, s, h)
        maxdiff = float(row.max())
        if maxdiff <= TOL:
            return maxdiff, None
        b, s, h = row.shape
        flat = int(row.argmax())
        wb, wi, wh = flat // (s * h), (flat // h) % s, flat % h
        bad = row > TOL
        qrows = torch.nonzero(bad.any(dim=2).any(dim=0)).flatten().tolist()
        zero = int((out == 0).all(dim=-1).sum())
        nan = int(torch.isnan(out).sum())
        fmt = lambda t: "[" + ", ".join(f"{float(z):.3g}" for z in t[:4]) + "]"  # noqa: E731
        return maxdiff, (f"max |diff| {maxdiff:.3g} at (b={wb}, i={wi}, h={wh}): fastattn {fmt(ours[wb, wi, wh])} "
                         f"vs {fmt(out[wb, wi, wh])}; {int(bad.sum())}/{row.numel()} rows (b, i, h) wrong; query rows "
                         f"{ranges(qrows)}; {zero} all-zero rows, {nan} NaN in the peer's output")

    # -- one case --
    def inputs(self, i, c):
        torch = self.torch
        torch.manual_seed(1000 + i)
        dt = getattr(torch, c["dtype"])
        b, s, h, hkv, d = c["b"], c["s"], c["h"], c["hkv"], c["d"]
        q = torch.randn(b, s, h, d, device=self.dev, dtype=dt)
        k = torch.randn(b, s, hkv, d, device=self.dev, dtype=dt)
        v = torch.randn(b, s, hkv, v_dim(c), device=self.dev, dtype=dt)
        bhsd = [t.transpose(1, 2) for t in (q, k, v)]
        # cuDNN takes no enable_gqa: the SDPA peers read K/V expanded to h_q heads (more bytes).
        ke, ve = (t.repeat_interleave(h // hkv, dim=2) for t in (k, v)) if h != hkv else (k, v)
        return {"bshd": (q, k, v), "bhsd": bhsd, "sdpa_bhsd": [t.transpose(1, 2) for t in (q, ke, ve)]}

    def failed(self, i, peer, e, label):
        """A peer's exception: its first line, printed under `label` (and returned for the record);
        when the CUDA context is lost, the worker leaves for a restart."""
        err = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"  {label} {peer:15s} error: {err}", flush=True)
        if self.context_lost():
            self.lost(i, peer, err)
        return err

    def check_all(self, i, peers, res, check):
        """check(peer) -> (its result dict, a note, what to time or None) for each peer in order:
        peers excluded after they broke a worker, and those the case does not apply to, are
        skipped; a failure is recorded in res. Returns {peer: what to time}."""
        timed = {}
        for peer in peers:
            key = f"{i}:{peer}"
            if key in self.excluded:
                res[peer] = dict(error=self.excluded[key], excluded=True)
                print(f"  check {peer:15s} skipped: {self.excluded[key]}", flush=True)
                continue
            self.emit(type="start", case=i, peer=peer, stage="check")
            if os.environ.get("FASTATTN_BENCH_CRASH") == key:  # test hook: a peer that kills the process
                os._exit(139)
            t0 = time.time()
            try:
                res[peer], note, what = check(peer)
            except NotApplicable:
                continue
            except Refused as e:
                res[peer] = dict(na=str(e)[:300])
                print(f"  check {peer:15s} n/a: {res[peer]['na']}", flush=True)
                continue
            except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
                res[peer] = dict(error=self.failed(i, peer, e, "check"))
                continue
            if what is not None:
                timed[peer] = what
            print(f"  check {peer:15s} {note} ({time.time() - t0:.1f}s)", flush=True)
        return timed

    def run_case(self, i, n, c, rounds):
        torch, args = self.torch, self.args
        flops, nbytes = case_flops(c), case_bytes(c)
        print(f"[{i + 1}/{n}] {c['name']}: b{c['b']} s{c['s']} h{c['h']}/{c['hkv']} {dims_label(c)} {c['dtype']} "
              f"({flops / 1e12:.2f} TFLOP, {nbytes / 1e6:.0f} MB), {rounds} round(s)", flush=True)
        x = self.inputs(i, c)
        ours = None  # fastattn's out (float32), the others' reference

        def check(peer):
            nonlocal ours
            fn = self.prepare(peer, c, x)
            out = self.as_bshd(fn, fn())
            if peer == "fastattn":
                ours = out
                return {}, "reference for the others", fn
            maxdiff, wrong = self.compare(ours, out) if ours is not None else (None, None)
            r = dict(maxdiff=maxdiff)
            note = "maxdiff " + ("-" if maxdiff is None else f"{maxdiff:.1e}")
            if wrong and peer == "flex":
                first = f"{wrong}; {self.block_mask_note(c, fn.block_mask)}"
                print(f"  check {peer:15s} WRONG {first}", flush=True)
                fn = self.flex_fn(c, *x["bhsd"], contiguous=True)
                maxdiff, wrong = self.compare(ours, self.as_bshd(fn, fn()))
                if wrong:
                    wrong = f"{wrong}; {self.block_mask_note(c, fn.block_mask)}"
                r = dict(maxdiff=maxdiff, variant="contiguous (b, h, s, d) copies", first_try=first)
                note = f"on contiguous copies: maxdiff {maxdiff:.1e}"
            if wrong:
                r["wrong"] = wrong
                return r, f"WRONG {wrong}", None
            return r, note, fn
        res = {}
        fns = self.check_all(i, PEERS, res, check)
        ours = None  # free the float32 copies before timing
        times = {p: [None] * rounds for p in fns}
        clocks = {p: [None] * rounds for p in fns}
        for r in range(rounds):
            for peer in rotation(list(fns), r):
                if "error" in res[peer] or (r and res[peer].get("slow")):
                    continue  # failed before; or slow: round 1 only, to keep the run short
                self.emit(type="start", case=i, peer=peer, stage=f"round {r + 1}")
                try:
                    ms = self.time_ms(fns[peer])
                except Exception as e:  # noqa: BLE001
                    res[peer]["error"] = self.failed(i, peer, e, f"round {r + 1}/{rounds}")
                    continue
                times[peer][r] = ms
                clocks[peer][r] = self.mhz
                if r == 0 and ms > args.slow_ms:
                    res[peer]["slow"] = True
                mhz = f" {self.mhz:5.0f} MHz" if self.mhz else ""
                print(f"  round {r + 1}/{rounds} {peer:15s} {ms:9.4f} ms {flops / ms / 1e9:8.1f} TFLOPS{mhz}", flush=True)
        for peer, ts in times.items():
            ms = over_rounds(ts)
            if ms is not None:
                res[peer].update(ms=ms, tflops=flops / ms / 1e9, ms_rounds=ts)
                if any(clocks[peer]):
                    res[peer].update(mhz=over_rounds(clocks[peer]), mhz_rounds=clocks[peer])
        row = dict(case=c["name"], params=c, flops=flops, bytes=nbytes, local=is_local(c), results=res)
        if "ms_rounds" in res.get("fastattn", {}):
            for name, base in (("ratio", BASELINE), ("ratio_bhsd", "cudnn-bhsd"), ("vs_fa3", "fa3"),
                               ("vs_ffpa", "ffpa")):
                if "ms_rounds" in res.get(base, {}):
                    row[name] = ratio_stats(res["fastattn"]["ms_rounds"], res[base]["ms_rounds"])
            cyc = cycle_ratio(res["fastattn"], res.get(BASELINE, {}))
            if cyc:
                row["cycle_ratio"] = cyc
            q = row.get("ratio")
            if q:
                print(f"  ratio fastattn/cuDNN {q['median']:.3f} (rounds {' '.join(f'{z:.3f}' for z in q['rounds'])})",
                      flush=True)
        if "ms_rounds" in res.get("fa3", {}) and "ms_rounds" in res.get(BASELINE, {}):
            # FA3's own ratio to cuDNN in this run: the bar issue #3's targets were taken from
            row["ratio_fa3"] = ratio_stats(res["fa3"]["ms_rounds"], res[BASELINE]["ms_rounds"])
            print(f"  ratio fa3/cuDNN {row['ratio_fa3']['median']:.3f}", flush=True)
        return row

    # -- backward mode --
    def bwd_inputs(self, i, c):
        """The forward's inputs plus dout, and fastattn's out and lse (every direct backward's input)."""
        x = self.inputs(i, c)
        q, _, v = x["bshd"]
        x["dout"] = self.torch.randn(*q.shape[:3], v.shape[-1], device=self.dev, dtype=q.dtype)  # out's shape
        fwd = self.fa.forward_fn(self.torch, *x["bshd"], c["causal"], tuple(c["window"]))
        x["out"], x["lse"], x["fwd"] = fwd(), fwd.lse, fwd
        return x

    def prepare_bwd(self, peer, c, x):
        """{stage: callable}: 'bwd' for peers with a backward entry (their time is the call's), else
        'fwd' and 'fwdbwd' (autograd: backward = the difference), plus 'grads' -> (dq, dk, dv) in
        (b, s, h, d) with K/V heads folded to h_kv."""
        torch = self.torch
        if not applicable_bwd(c, peer, self.args.smoke_cpu):
            raise NotApplicable()
        q, k, v = x["bshd"]
        causal, window = c["causal"], tuple(c["window"])
        det = peer.endswith("-det")
        if peer in ("fastattn", "fastattn-det"):
            run = self.fa.backward_fn(torch, q, k, v, x["out"], x["lse"], x["dout"], causal, window, det)
            return {"bwd": run, "grads": run} if det else {"bwd": run, "fwd": x["fwd"], "grads": run}
        if peer in ("fa3", "fa3-det"):
            if self.fa3 is None:
                raise NotApplicable()
            run = self.fa3.backward_fn(torch, q, k, v, x["out"], x["lse"], x["dout"], causal, window, det)
            stages = {"bwd": run, "grads": run}
            if not det:  # FA3's own forward, for its fwd+bwd column, where the library has that variant
                try:
                    fwd = self.fa3.forward_fn(torch, q, k, v, causal, window)
                    fwd()
                    stages["fwd"] = fwd
                except (NotApplicable, RuntimeError):
                    pass
            return stages
        if peer == "fa4":
            if self.fa4 is None:
                raise NotApplicable()
            fwd, run = self.fa4.backward_fn(torch, q, k, v, x["dout"], causal, window)
            return {"bwd": run, "fwd": fwd, "grads": run}
        group = c["h"] // c["hkv"]
        if peer == "flex":
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            fn = self.flex_fn(c, *(t.transpose(1, 2) for t in leaves))
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            name = {"sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
                    "sdpa-efficient": "EFFICIENT_ATTENTION"}[peer]
            backend = getattr(SDPBackend, name if self.cuda else "MATH")
            q4, k4, v4 = x["sdpa_bhsd"]  # K/V expanded to h_q heads for GQA (cuDNN takes no enable_gqa)
            leaves = [t.transpose(1, 2).detach().requires_grad_() for t in (q4, k4, v4)]
            sdpa = torch.nn.functional.scaled_dot_product_attention

            def fn():
                with sdpa_kernel(backend):
                    return sdpa(*(t.transpose(1, 2) for t in leaves), is_causal=causal)
            self.sdpa_refusal(fn)
        dout4 = x["dout"].transpose(1, 2)

        def fwdbwd():
            return torch.autograd.grad(fn(), leaves, dout4)

        def grads():
            dq, dk, dv = fwdbwd()
            if peer != "flex" and group > 1:  # fold the expanded heads back onto their KV head
                dk, dv = (t.unflatten(2, (c["hkv"], group)).sum(3) for t in (dk, dv))
            return dq, dk, dv
        return {"fwd": fn, "fwdbwd": fwdbwd, "grads": grads}

    def compare_grads(self, ours, theirs):
        """max over dq, dk, dv of max |diff| / max(1, max |ours|), and a description when over BWD_TOL."""
        torch, worst, where = self.torch, 0.0, None
        for name, a, b in zip(("dq", "dk", "dv"), ours, theirs):
            diff = float(torch.nan_to_num((a - b.float()).abs(), nan=float("inf")).max())
            rel = diff / max(1.0, float(a.abs().max()))
            if rel > worst:
                worst, where = rel, f"{name}: max |diff| {diff:.3g} (max |fastattn| {float(a.abs().max()):.3g})"
        return worst, (where if worst > BWD_TOL else None)

    def run_case_bwd(self, i, n, c, rounds):
        torch, args = self.torch, self.args
        flops, nbytes = bwd_flops(c), bwd_bytes(c)
        print(f"[{i + 1}/{n}] backward {c['name']}: b{c['b']} s{c['s']} h{c['h']}/{c['hkv']} {dims_label(c)} {c['dtype']} "
              f"({flops / 1e12:.2f} TFLOP, {nbytes / 1e6:.0f} MB), {rounds} round(s)", flush=True)
        ours = None  # fastattn's dq, dk, dv (float32), the others' reference
        try:
            x = self.bwd_inputs(i, c)
        except Exception as e:  # noqa: BLE001 - our forward failed: no backward case to run
            self.failed(i, "fastattn", e, "forward")
            x = None

        def check(peer):
            nonlocal ours
            if x is None:
                raise RuntimeError("fastattn's forward failed: no out/lse for the backward")
            st = self.prepare_bwd(peer, c, x)
            got = [t.float() for t in st["grads"]()]
            if self.cuda:
                torch.cuda.synchronize()
            if peer == "fastattn":
                ours = got
                return {}, "reference for the others", st
            maxdiff, wrong = self.compare_grads(ours, got) if ours is not None else (None, None)
            if wrong:
                return dict(maxdiff=maxdiff, wrong=wrong), f"WRONG {wrong}", None
            return dict(maxdiff=maxdiff), "maxdiff " + ("-" if maxdiff is None else f"{maxdiff:.1e}"), st
        res = {}
        stages = self.check_all(i, BWD_PEERS, res, check)
        ours = None
        times = {p: {k: [None] * rounds for k in st if k != "grads"} for p, st in stages.items()}
        for r in range(rounds):
            for peer in rotation(list(stages), r):
                for stage in times[peer]:
                    if "error" in res[peer]:
                        break
                    self.emit(type="start", case=i, peer=peer, stage=f"round {r + 1} {stage}")
                    try:
                        times[peer][stage][r] = self.time_ms(stages[peer][stage])
                    except Exception as e:  # noqa: BLE001
                        res[peer]["error"] = f"{stage}: " + self.failed(i, peer, e, f"round {r + 1}/{rounds} {stage}")
                bwd = self.bwd_round(times[peer], r)
                if bwd is not None:
                    print(f"  round {r + 1}/{rounds} {peer:15s} backward {bwd:9.4f} ms {flops / bwd / 1e9:8.1f} TFLOPS",
                          flush=True)
        for peer, t in times.items():
            bwd_rounds = [self.bwd_round(t, r) for r in range(rounds)]
            ms = over_rounds(bwd_rounds)
            if ms is None:
                continue
            res[peer].update(ms=ms, tflops=flops / ms / 1e9, ms_rounds=bwd_rounds,
                             method="direct" if "bwd" in t else "(fwd+bwd) - fwd")
            fb = [a + b if a and b else None for a, b in zip(t.get("fwd", []), t["bwd"])] if "bwd" in t \
                else t.get("fwdbwd", [])
            if over_rounds(fb) is not None:
                res[peer]["fwdbwd_ms"] = over_rounds(fb)
        row = dict(case=c["name"], params=c, flops=flops, bytes=nbytes, local=is_local(c), results=res)
        ours_r = res.get("fastattn", {}).get("ms_rounds")
        for name, mine, base in (("ratio", "fastattn", BASELINE), ("vs_fa3", "fastattn", "fa3"),
                                 ("ratio_fa3", "fa3", BASELINE), ("det_cost", "fastattn", "fastattn-det"),
                                 ("fa3_det_cost", "fa3", "fa3-det")):  # ratio_stats: base ms / mine ms
            a, b = res.get(mine, {}).get("ms_rounds"), res.get(base, {}).get("ms_rounds")
            if a and b:
                row[name] = ratio_stats(a, b)
        if ours_r and row.get("ratio"):
            print(f"  ratio fastattn/cuDNN (backward) {row['ratio']['median']:.3f}", flush=True)
        return row

    @staticmethod
    def bwd_round(t, r):
        """Round r's backward ms: the direct time, else (fwd+bwd) - fwd; None when missing."""
        if "bwd" in t:
            return t["bwd"][r]
        fb, f = t.get("fwdbwd", [None] * (r + 1))[r], t.get("fwd", [None] * (r + 1))[r]
        return fb - f if fb is not None and f is not None and fb > f else None

    def as_bshd(self, fn, out):
        out = out.transpose(1, 2) if getattr(fn, "layout", "bshd") == "bhsd" else out
        if self.cuda:
            self.torch.cuda.synchronize()
        return out.to(self.torch.float32, copy=True)  # a copy: fastattn reuses its out buffer

    def run(self):
        torch, args = self.torch, self.args
        backward = args.mode == "backward"
        plan = select(plan_for(args), args.filter)
        meta = dict(device=torch.cuda.get_device_name() if self.cuda else "CPU (smoke run)", mode=args.mode,
                    torch=torch.__version__, cudnn=torch.backends.cudnn.version() if self.cuda else None,
                    worker_start=args.start)
        if self.cuda:
            meta["copy"] = self.copy_bandwidth()
            print(f"copy bandwidth: {meta['copy']['gbps']:.0f} GB/s (1 GiB d2d copy, {meta['copy']['ms']:.3f} ms)",
                  flush=True)
        self.emit(type="meta", **meta)
        for i in range(args.start, len(plan)):
            left = args.deadline - time.time()
            if left <= 0:
                self.emit(type="row", case=i, row=dict(case=plan[i]["name"], missing="skipped: time budget spent"))
                continue
            rounds = args.rounds if left > 0.25 * args.budget_s else 1  # near the budget: one round
            run_case = self.run_case_bwd if backward else self.run_case
            row = run_case(i, len(plan), plan[i], rounds)
            self.emit(type="row", case=i, row=row)
            if self.cuda:
                torch.cuda.empty_cache()
        self.events.close()
        return 0


# --- the driver ---------------------------------------------------------------------------------

def plan_for(args):
    if args.mode == "backward":
        return bwd_cases(args.preset, args.smoke_cpu)
    return cases(args.preset, args.smoke_cpu)


def select(plan, pattern):
    return [c for c in plan if not pattern or re.search(pattern, c["name"])]


def read_events(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a crash
    return out


def commit():
    env = os.environ.get("FASTATTN_COMMIT")
    if env:
        return env
    try:
        text = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        text = ""
    return text if re.fullmatch(r"[0-9a-f]{6,40}", text) else "unknown"


def worker_args(args):
    out = ["--lib", args.lib, "--mode", args.mode, "--preset", args.preset, "--rounds", str(args.rounds), "--reps", str(args.reps),
           "--warmup", str(args.warmup), "--slow-ms", str(args.slow_ms), "--budget-s", str(args.budget_s),
           "--cooldown-ms", str(args.cooldown_ms)]
    if args.fa3_lib:
        out += ["--fa3-lib", args.fa3_lib]
    if args.fa4_site:
        out += ["--fa4-site", args.fa4_site]
    if args.ffpa_site:
        out += ["--ffpa-site", args.ffpa_site]
    if args.no_flush:
        out.append("--no-flush")
    if args.filter:
        out += ["--filter", args.filter]
    if args.smoke_cpu:
        out.append("--smoke-cpu")
    return out


def exclude_arg(text):
    """--exclude's value: CASE:PEER=WHY, CASE a case's index among those --filter keeps, PEER a peer's name."""
    m = re.fullmatch(r"(\d+):([^=:]+)=(.+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}': expected CASE:PEER=WHY (e.g. 3:flex=slow compile)")
    if m.group(2) not in PEERS + BWD_PEERS:
        raise argparse.ArgumentTypeError(f"'{text}': no peer '{m.group(2)}' (peers: {', '.join(sorted(set(PEERS + BWD_PEERS)))})")
    return text


def drive(args, plan):
    events = os.path.join(args.out, "events.jsonl")
    open(events, "w").close()
    t_start = time.time()
    deadline = t_start + args.budget_s
    # peers left out from the start (--exclude), and those that broke a worker
    excluded = {k: LEFT_OUT + why for k, why in (e.split("=", 1) for e in args.exclude)}
    restarts, start = [], 0
    for attempt in range(MAX_WORKERS):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--events", events, "--start", str(start),
               "--deadline", str(deadline)] + worker_args(args) + [f"--exclude={k}={v}" for k, v in excluded.items()]
        try:
            rc = subprocess.run(cmd, timeout=max(30.0, deadline + 30 - time.time())).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        evs = read_events(events)
        done = {e["case"] for e in evs if e["type"] == "row"}
        pending = [i for i in range(start, len(plan)) if i not in done]
        if not pending:
            break
        nxt = pending[0]
        seen = [e for e in evs if e.get("case") == nxt and e["type"] in ("start", "lost")]
        # No restart when the worker ended normally, was killed for time, never reached the case,
        # or the budget is spent: the rows so far are written.
        if rc in (0, "timeout") or not seen or attempt == MAX_WORKERS - 1 or time.time() > deadline:
            print(f"driver: worker exit {rc}; {len(pending)} case(s) not run", flush=True)
            break
        last = seen[-1]
        why = last.get("error") or f"worker died (exit {rc})"
        excluded[f"{nxt}:{last['peer']}"] = f"{why} [at its {last.get('stage', 'check')}; left out on restart]"
        restarts.append(dict(case=plan[nxt]["name"], peer=last["peer"], exit=rc, error=why))
        print(f"driver: worker exit {rc} at [{nxt + 1}/{len(plan)}] {plan[nxt]['name']} / {last['peer']}: {why}; "
              f"restarting at this case without that peer", flush=True)
        start = nxt
    rows_by_case = {e["case"]: e["row"] for e in evs if e["type"] == "row"}
    rows = []
    for i, c in enumerate(plan):
        row = rows_by_case.get(i) or dict(case=c["name"], missing="not run (worker stopped)")
        rows.append(row)
    metas = [e for e in evs if e["type"] == "meta"]
    meta = dict(metas[0]) if metas else {}
    meta.pop("type", None)
    meta.pop("worker_start", None)
    absent = {e["peer"]: e["why"] for e in evs if e["type"] == "absent"}
    if absent:
        meta["absent"] = absent
    copy = meta.get("copy")
    for r in rows:
        if copy and "bytes" in r:
            r["floor_ms"] = r["bytes"] / copy["gbps"] / 1e6
    meta.update(date=time.strftime("%Y-%m-%d %H:%M:%S"), commit=commit(), rounds=args.rounds, reps=args.reps,
                warmup=args.warmup, tol=TOL, flops_rule=FLOPS_RULE, restarts=restarts,
                seconds=round(time.time() - t_start),
                timing="wall clock (CPU smoke run)" if args.smoke_cpu else
                ("L2 flushed by a 256 MiB memset before each timed call" if not args.no_flush else "no L2 flush")
                + "; host launch work hidden behind a GPU-side spin"
                + (f"; {args.cooldown_ms:.0f} ms idle before each measurement" if args.cooldown_ms > 0 else ""))
    stem = "peers-bwd" if args.mode == "backward" else "peers"
    if args.mode == "backward":
        meta.update(flops_rule=f"{BWD_FLOPS_FACTOR} x ({FLOPS_RULE})", tol=BWD_TOL)
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    text = (markdown_bwd if args.mode == "backward" else markdown)(meta, rows)
    with open(os.path.join(args.out, stem + ".md"), "w") as f:
        f.write(text)
    print(text, flush=True)
    print(f"bench: {meta['seconds']} s, {len(restarts)} restart(s)", flush=True)
    ok = all("results" in r and "ms" in r["results"].get("fastattn", {}) for r in rows)
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="build/src/libfastattn.so")
    ap.add_argument("--fa3-lib", default=os.environ.get("FASTATTN_FA3_LIB", ""),
                    help="FlashAttention-3 as a peer: bench/fa3/libfa3peer.so from bench/fa3/build.sh "
                         "(default $FASTATTN_FA3_LIB; without it the fa3 column is '-')")
    ap.add_argument("--fa4-site", default=os.environ.get("FASTATTN_FA4_SITE", ""),
                    help="FlashAttention-4 as a peer: the folder flash-attn-4 and nvidia-cutlass-dsl were pip-installed "
                         "into (--target), added with site.addsitedir (default $FASTATTN_FA4_SITE; flash_attn.cute "
                         "already importable works too; else the fa4 column is '-')")
    ap.add_argument("--ffpa-site", default=os.environ.get("FASTATTN_FFPA_SITE", ""),
                    help="FFPA as a peer (forward, d >= 320): the folder ffpa-attn, nvidia-cutlass-dsl, quack-kernels and "
                         "apache-tvm-ffi were pip-installed into (--target), added with site.addsitedir (default "
                         "$FASTATTN_FFPA_SITE; ffpa_attn already importable works too; else the ffpa column is '-')")
    ap.add_argument("--mode", choices=["forward", "backward"], default="forward",
                    help="backward: dq, dk, dv beside FA3's backward, the SDPA backends and Flex (writes peers-bwd.*)")
    ap.add_argument("--preset", choices=["quick", "full", "dv", "splitd"], default="full",
                    help="dv: d 192 with d_v 128 only (b 2 h 16, s 4k and 8k, full and causal)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--rounds", type=int, default=3, help="rounds per case (default 3)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per measurement (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls before each measurement (default 3)")
    ap.add_argument("--no-flush", action="store_true", help="no L2 flush between timed calls")
    ap.add_argument("--slow-ms", type=float, default=25.0,
                    help="a peer slower than this in round 1 is timed in round 1 only (default 25)")
    ap.add_argument("--cooldown-ms", type=float, default=250.0,
                    help="idle time before each measurement, so each starts from the same power state (default 250)")
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="time budget: past 3/4 of it one round per case, past it the rest is skipped (default 330)")
    ap.add_argument("--filter", help="only cases whose name matches this regex")
    ap.add_argument("--list", action="store_true", help="print the cases and peers, then exit (no GPU needed)")
    ap.add_argument("--smoke-cpu", action="store_true", help=argparse.SUPPRESS)  # tiny CPU run of the pipeline
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--events", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    ap.add_argument("--exclude", action="append", default=[], metavar="CASE:PEER=WHY", type=exclude_arg,
                    help="leave PEER out of case CASE (its 0-based index among the cases --filter keeps: --list numbers from 1); repeatable")
    args = ap.parse_args(argv)
    if args.worker:
        return Worker(args).run()
    plan = select(plan_for(args), args.filter)
    for e in args.exclude:
        if int(e.split(":", 1)[0]) >= len(plan):
            ap.error(f"--exclude {e}: case {e.split(':', 1)[0]} is past the {len(plan)} cases --filter keeps (0-based)")
    if args.list:
        backward = args.mode == "backward"
        for i, c in enumerate(plan):
            peers = [p for p in (BWD_PEERS if backward else PEERS)
                     if (applicable_bwd if backward else applicable)(c, p, args.smoke_cpu)]
            print(f"[{i + 1}/{len(plan)}] {c['name']:36s} {(bwd_flops if backward else case_flops)(c) / 1e12:7.3f} TFLOP "
                  f"{(bwd_bytes if backward else case_bytes)(c) / 1e6:7.0f} MB  " + " ".join(peers))
        return 0
    os.makedirs(args.out, exist_ok=True)
    return drive(args, plan)


if __name__ == "__main__":
    sys.exit(main())
