#!/usr/bin/env python3
"""Nsight Compute side by side: our forward kernel (through `fastattn run`), the cuDNN kernel
that PyTorch SDPA picks for the same shape and, with --fa3-lib, FlashAttention-3's (bench/fa3/) (issue #6, docs/profiling.md). Driven by
scripts/ncu-metrics:

    scripts/ncu-metrics --out DIR [--fastattn build/cli/fastattn] [--warmup 2] [--no-cudnn]
                        --case NAME "FASTATTN RUN FLAGS" [--case NAME "FLAGS" ...]

Per case: one ncu run per kernel (--clock-control none, one launch after the warm-ups, an
explicit metric list filtered by `ncu --query-metrics`), exported to DIR/NAME-{fastattn,cudnn}.ncu-rep
and read back with --import --csv --page raw. Writes DIR/ncu.md (one table per case: tensor pipe,
occupancy, issue slots, throughput, the top stall reasons) and DIR/ncu.json. When ncu is missing or
cannot read the counters (ERR_NVGPUCTRPERM, a sandbox), the tables say so and the exit status is 0;
it is non-zero only for bad arguments.
"""

import argparse
import csv
import glob
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# (label, metric); the first column of each table.
HEADLINE = [
    ("duration (us)", "gpu__time_duration.sum"),
    ("SM cycles", "sm__cycles_elapsed.avg"),
    # The spread of the SMs' busy cycles shows the schedule's tail: a static tile schedule leaves
    # SMs idle once their share is done (1 - avg / max is the idle fraction of the busiest's time).
    ("SM active cycles, min over SMs", "sm__cycles_active.min"),
    ("SM active cycles, mean over SMs", "sm__cycles_active.avg"),
    ("SM active cycles, max over SMs", "sm__cycles_active.max"),
    ("tensor pipe active, % of peak (hmma pipe, counts wgmma)",
     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe active, % of peak (all tensor pipes)", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("wgmma instructions (gmma pipe)", "sm__inst_executed_pipe_tensor_op_gmma.sum"),
    ("achieved occupancy, % of peak warps", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("issue slots used, %", "sm__inst_issued.avg.pct_of_peak_sustained_active"),
    ("issue active (scheduler), %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("SM throughput, % of peak", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM throughput, % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    # K/V reach every CTA through L2: with 128-row tiles that is 1/128 byte per FLOP, near the
    # L2's bandwidth at ~700 TFLOPS (docs/notes/fwd-sm90.md, pass 16).
    ("L2 throughput, % of peak", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 sectors read, % of peak", "lts__t_sectors_op_read.avg.pct_of_peak_sustained_elapsed"),
    ("L2 hit rate, %", "lts__t_sector_hit_rate.pct"),
    ("L2 bytes, all operations (MB)", "lts__t_bytes.sum"),
    ("warp cycles per issued instruction", "smsp__average_warps_active_per_issue_active.ratio"),
]
STALLS = ["long_scoreboard", "wait", "short_scoreboard", "math_pipe_throttle", "barrier", "gmma", "membar",
          "mio_throttle", "lg_throttle", "branch_resolving", "dispatch_stall", "drain", "imc_miss",
          "no_instruction", "not_selected", "selected", "sleeping", "tex_throttle", "misc"]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
TOP_STALLS = 6


def find_ncu():
    for c in [os.environ.get("NCU"), shutil.which("ncu"), *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")),
              "/usr/local/cuda/bin/ncu", *sorted(glob.glob("/usr/local/cuda*/nsight-compute*/ncu"))]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def run(cmd, log, timeout):
    """Runs cmd with output to log; returns (exit code, output). A timeout counts as exit 124."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
        out += f"\n[ncu-metrics] timed out after {timeout} s\n"
    with open(log, "w") as f:
        f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n" + out)
    return rc, out


def ncu_error(out):
    """The reason ncu gave, when it gave one."""
    if "ERR_NVGPUCTRPERM" in out:
        return ("ncu cannot read the GPU performance counters here (ERR_NVGPUCTRPERM: profiling is restricted "
                "to admin users on this machine/driver)")
    errs = [l.strip() for l in out.splitlines() if l.startswith("==ERROR==")]
    return errs[0] if errs else None


def available_metrics(ncu, log):
    """Base metric names this ncu knows for this GPU, or None when the query fails."""
    rc, out = run([ncu, "--query-metrics"], log, 120)
    names = set(re.findall(r"^\s*([a-z0-9]+__[a-z0-9_]+)", out, flags=re.M))
    return names if rc == 0 and names else None


def wanted_metrics(known):
    """The metrics to ask for, and those left out because this ncu does not know them. A family the
    query does not list at all (derived ratios may be missing from it) is kept, not dropped."""
    metrics = [m for _, m in HEADLINE] + [STALL_METRIC.format(s) for s in STALLS]
    if known is None:
        return metrics, []
    stall_family = any(k.startswith("smsp__average_warps_issue_stalled_") for k in known)
    def keep(m):
        return m.split(".")[0] in known or (m.startswith("smsp__average_warps_issue_stalled_") and not stall_family)
    return [m for m in metrics if keep(m)], [m for m in metrics if not keep(m)]


# Asked for alone when ncu rejects the full list (names that every sm90 ncu since 2023 has).
CORE = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__inst_issued.avg.pct_of_peak_sustained_active"]


# ncu 2025.3 writes ms/us/ns in the raw CSV's unit row (older versions msecond/usecond/nsecond).
TIME_UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
              "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
# Byte counts likewise, to megabytes.
BYTE_UNITS = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "Tbyte": 1e6,
              "B": 1e-6, "KB": 1e-3, "MB": 1.0, "GB": 1e3, "TB": 1e6}


def read_report(ncu, rep, log, extra=()):
    """Rows of the raw page of an exported report: one dict per profiled kernel. Durations are
    converted to microseconds and byte counts to megabytes (ncu scales their unit to the value);
    row["_units"] maps each column to its unit as printed. extra: more ncu import flags."""
    rc, out = run([ncu, "--import", rep, "--csv", "--page", "raw", *extra], log, 120)
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if rc != 0 or start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 3:
        return []
    header, units = rows[0], rows[1]
    out_rows = []
    for r in rows[2:]:
        if len(r) != len(header):
            continue
        row = dict(zip(header, r))
        row["_units"] = dict(zip(header, units))
        for col, unit in zip(header, units):
            if unit in TIME_UNITS and number(row[col]) is not None:
                row[col] = number(row[col]) * TIME_UNITS[unit]
            elif unit in BYTE_UNITS and number(row[col]) is not None:
                row[col] = number(row[col]) * BYTE_UNITS[unit]
        out_rows.append(row)
    return out_rows


def number(v):
    try:
        return float(str(v).replace(",", ""))
    except (TypeError, ValueError):
        return None


def profile(ncu, metrics, target, name, out_dir, filters, timeout):
    """One ncu run on `target` (a command) with `filters`; returns (row or None, note or None).
    When ncu rejects the metric list, once more with the CORE metrics only."""
    rep = os.path.join(out_dir, name)
    note = None
    for attempt, ms in enumerate((metrics, [m for m in CORE if m in metrics] or CORE)):
        if os.path.exists(rep + ".ncu-rep"):
            os.remove(rep + ".ncu-rep")
        cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(ms), "--export", rep, "--force-overwrite",
               *filters, *target]
        rc, out = run(cmd, rep + (".log" if attempt == 0 else "-core.log"), timeout)
        rows = read_report(ncu, rep + ".ncu-rep", rep + "-import.log") if os.path.exists(rep + ".ncu-rep") else []
        if rows:
            # Several kernels in the range: the longest is the attention kernel.
            row = max(rows, key=lambda r: number(r.get("gpu__time_duration.sum")) or 0)
            if attempt:
                note = f"only the core metrics (the full list failed: {note})"
            elif rc != 0:
                note = ncu_error(out)
            return row, note
        note = (f"ncu timed out after {timeout} s" if rc == 124 else
                ncu_error(out) or f"ncu exit {rc}, no kernel profiled (see {name}.log)")
        if "ERR_NVGPUCTRPERM" in out or "metric" not in out.lower() or rc == 124:
            break  # not a metric-list problem: a second try would fail the same way
    return None, note


# ---- the two sides ---------------------------------------------------------------------------

def parse_case(flags):
    """The problem of `fastattn run` flags, with the CLI's GPU defaults."""
    ap = argparse.ArgumentParser(add_help=False)
    for f, d in (("--batch", 4), ("--seqlen", 4096), ("--seqlen-k", None), ("--heads", 32), ("--kv-heads", None),
                 ("--dim", 128)):
        ap.add_argument(f, type=int, default=d)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--causal", dest="causal", action="store_true", default=None)
    ap.add_argument("--no-causal", dest="causal", action="store_false")
    ap.add_argument("--window")
    ap.add_argument("--softcap", type=float, default=0.0)
    a, _ = ap.parse_known_args(shlex.split(flags))
    kv = a.kv_heads or (a.heads // 4 if a.heads % 4 == 0 else a.heads)
    causal = a.causal if a.causal is not None else a.window is None
    return {"b": a.batch, "s": a.seqlen, "sk": a.seqlen_k or a.seqlen, "h": a.heads, "hkv": kv, "d": a.dim,
            "dtype": {"bf16": "bfloat16", "fp16": "float16"}.get(a.dtype, a.dtype), "causal": causal,
            "window": a.window, "softcap": a.softcap}


CUDNN_SNIPPET = r'''
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
b, s, sk, h, hkv, d, causal, dt, warmup = sys.argv[1:]
b, s, sk, h, hkv, d, warmup = map(int, (b, s, sk, h, hkv, d, warmup))
dt = getattr(torch, dt)
# The benchmark baseline's layout (bench/run-peers.py, sdpa-cudnn): (b, s, h, d) storage viewed as
# (b, h, s, d); K/V expanded to the query heads, as cuDNN's SDPA path takes no GQA.
q = torch.randn(b, s, h, d, device="cuda", dtype=dt)
k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt).repeat_interleave(h // hkv, dim=2)
v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt).repeat_interleave(h // hkv, dim=2)
q, k, v = (t.transpose(1, 2) for t in (q, k, v))
sdpa = torch.nn.functional.scaled_dot_product_attention
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(warmup):
        sdpa(q, k, v, is_causal=causal == "1")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("cudnn_sdpa")
    sdpa(q, k, v, is_causal=causal == "1")
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
'''


FA3_SNIPPET = r'''
import importlib.util, sys, torch
peers, lib, b, s, sk, h, hkv, d, causal, dt, warmup = sys.argv[1:]
b, s, sk, h, hkv, d, warmup = map(int, (b, s, sk, h, hkv, d, warmup))
spec = importlib.util.spec_from_file_location("run_peers", peers)
run_peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_peers)
dt = getattr(torch, dt)
# FA3 reads fastattn's (b, s, h, d) layout directly, GQA included (bench/run-peers.py, fa3).
q = torch.randn(b, s, h, d, device="cuda", dtype=dt)
k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
fn = run_peers.Fa3(lib).forward_fn(torch, q, k, v, causal == "1", (-1, -1))
for _ in range(warmup):
    fn()
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("fa3")
fn()
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
'''


def profile_fa3(ncu, metrics, name, c, a):
    """FlashAttention-3's kernel for the same problem (bench/fa3/, through run-peers' Fa3 class)."""
    snippet = os.path.join(a.out, "fa3_fwd.py")
    with open(snippet, "w") as f:
        f.write(FA3_SNIPPET)
    peers = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "bench", "run-peers.py")
    target = [sys.executable, snippet, peers, a.fa3_lib, *map(str, (c["b"], c["s"], c["sk"], c["h"], c["hkv"], c["d"])),
              "1" if c["causal"] else "0", c["dtype"], str(a.warmup)]
    return profile(ncu, metrics, target, f"{name}-fa3", a.out,
                   ["--nvtx", "--nvtx-include", "fa3/", "--kernel-name", "regex:device_kernel"], a.timeout)


def profile_case(ncu, metrics, name, flags, a):
    c = parse_case(flags)
    result = {"name": name, "flags": flags, "problem": c, "fastattn": None, "cudnn": None, "notes": []}
    ours = [a.fastattn, "run", "--device", "cuda", "--quiet", "--check-rows", "0", "--warmup", str(a.warmup),
            "--iters", "1", *shlex.split(flags)]
    row, note = profile(ncu, metrics, ours, f"{name}-fastattn", a.out,
                        ["--kernel-name", "regex:fwd_kernel", "--launch-skip", str(a.warmup), "--launch-count", "1"],
                        a.timeout)
    result["fastattn"] = row
    if note:
        result["notes"].append(f"fastattn: {note}")
    if a.fa3_lib:
        if c["window"] or c["softcap"]:
            result["notes"].append("FA3: not run (bench/fa3 builds no window or softcap kernels)")
        else:
            result["fa3"], note = profile_fa3(ncu, metrics, name, c, a)
            if note:
                result["notes"].append(f"FA3: {note}")
    if a.no_cudnn:
        return result
    if c["window"] or c["softcap"]:
        result["notes"].append("cuDNN: not run (SDPA has no local window or softcap)")
        return result
    snippet = os.path.join(a.out, "cudnn_sdpa.py")
    with open(snippet, "w") as f:
        f.write(CUDNN_SNIPPET)
    target = [sys.executable, snippet, *map(str, (c["b"], c["s"], c["sk"], c["h"], c["hkv"], c["d"])),
              "1" if c["causal"] else "0", c["dtype"], str(a.warmup)]
    row, note = profile(ncu, metrics, target, f"{name}-cudnn", a.out, ["--nvtx", "--nvtx-include", "cudnn_sdpa/"],
                        a.timeout)
    if row is None and not (note or "").startswith(("ncu cannot read", "ncu timed out")):
        # No kernel inside the NVTX range (no NVTX in this torch?): the first attention-like kernel
        # after the warm-ups.
        row, note2 = profile(ncu, metrics, target, f"{name}-cudnn", a.out,
                             ["--kernel-name", "regex:(?i)cudnn|fmha|flash|sdpa|attn", "--launch-skip", str(a.warmup),
                              "--launch-count", "1"], a.timeout)
        note = note2 if row is None else f"kernel chosen by name regex (NVTX filter found none: {note})"
    result["cudnn"] = row
    if note:
        result["notes"].append(f"cuDNN: {note}")
    if c["causal"] and c["s"] != c["sk"]:
        result["notes"].append("cuDNN: SDPA's is_causal is top-left aligned, ours bottom-right (s_q != s_k)")
    return result


# ---- report ----------------------------------------------------------------------------------

def fmt(v):
    x = number(v)
    if x is None:
        return "n/a" if v in (None, "") else str(v)
    if x >= 1000 or x == int(x):
        return f"{x:,.0f}"
    return f"{x:.2f}"


def kernel_name(row):
    """The kernel's name without return type and parameter list (templates kept: they carry the tile)."""
    if not row:
        return "not profiled"
    n = (row.get("Kernel Name") or row.get("Function Name") or "?").strip()
    if n.startswith("void "):
        n = n[5:]
    if n.endswith(")"):
        depth = 0
        for i in range(len(n) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(n[i], 0)
            if depth == 0:
                n = n[:i]
                break
    return n if len(n) <= 120 else n[:117] + "..."


def case_table(r, missing):
    p = r["problem"]
    shape = (f"b={p['b']} s={p['s']} h={p['h']}/{p['hkv']} d={p['d']} {p['dtype']}"
             f"{' causal' if p['causal'] else ''}")
    ours, theirs = r["fastattn"] or {}, r["cudnn"] or {}
    fa3 = "fa3" in r  # a third column only when FA3 was asked for
    fa3_row = r.get("fa3") or {}
    mid = lambda x: f" {x} |" if fa3 else ""  # noqa: E731
    md = [f"### {r['name']}: {shape}", "", "| metric | fastattn |" + mid("FA3") + " cuDNN (SDPA) |",
          "|---|---:|" + ("---:|" if fa3 else "") + "---:|",
          f"| kernel | `{kernel_name(r['fastattn'])}` |" + mid(f"`{kernel_name(r.get('fa3'))}`") +
          f" `{kernel_name(r['cudnn'])}` |"]
    for label, m in HEADLINE:
        if m in missing:
            continue
        v1, v2 = ours.get(m), theirs.get(m)
        md.append(f"| {label} | {fmt(v1)} |" + mid(fmt(fa3_row.get(m))) + f" {fmt(v2)} |")
    # Top stall reasons of either kernel, in warp cycles per issued instruction.
    def stalls(row):
        return {s: number(row.get(STALL_METRIC.format(s))) for s in STALLS if number(row.get(STALL_METRIC.format(s)))}
    s1, s2, s3 = stalls(ours), stalls(theirs), stalls(fa3_row)
    top = sorted(set().union(*(sorted(x, key=x.get, reverse=True)[:TOP_STALLS] for x in (s1, s2, s3))),
                 key=lambda s: -(s1.get(s) or 0))
    for s in top:
        md.append(f"| stall `{s}` (warp cycles per issue) | {fmt(s1.get(s))} |" + mid(fmt(s3.get(s))) +
                  f" {fmt(s2.get(s))} |")
    md.append("")
    md += [f"- {n}" for n in r["notes"]]
    return md


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fastattn", default="build/cli/fastattn")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=180, help="seconds per ncu run")
    ap.add_argument("--no-cudnn", action="store_true")
    ap.add_argument("--fa3-lib", default=os.environ.get("FASTATTN_FA3_LIB", ""),
                    help="FlashAttention-3 as a third column (bench/fa3/libfa3peer.so; default $FASTATTN_FA3_LIB)")
    ap.add_argument("--case", nargs=2, action="append", metavar=("NAME", "FLAGS"), required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)

    md = ["## Nsight Compute: fastattn vs " + ("FA3 and cuDNN" if a.fa3_lib else "cuDNN"), ""]
    report = {"ncu": None, "cases": [], "missing_metrics": []}
    ncu = find_ncu()
    if ncu is None:
        md += ["ncu not found (PATH, $NCU, /opt/nvidia/nsight-compute/*/ncu, /usr/local/cuda/bin/ncu): "
               "no counters collected."]
    elif not os.access(a.fastattn, os.X_OK):
        md += [f"{a.fastattn} is not an executable: build the CLI first."]
    else:
        report["ncu"] = ncu
        rc, version = run([ncu, "--version"], os.path.join(a.out, "ncu-version.log"), 60)
        md += [f"{ncu} ({version.strip().splitlines()[-1] if version.strip() else 'version unknown'}), "
               "`--clock-control none`, one launch after the warm-ups; stalls are "
               "`smsp__average_warps_issue_stalled_*_per_issue_active.ratio`.", ""]
        metrics, missing = wanted_metrics(available_metrics(ncu, os.path.join(a.out, "ncu-query.log")))
        report["missing_metrics"] = missing
        if missing:
            md += [f"Not in this ncu's metric list, left out: {', '.join(missing)}", ""]
        for name, flags in a.case:
            r = profile_case(ncu, metrics, name, flags, a)
            report["cases"].append(r)
            md += case_table(r, missing) + [""]
    with open(os.path.join(a.out, "ncu.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(a.out, "ncu.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
