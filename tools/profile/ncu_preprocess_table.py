#!/usr/bin/env python3
"""Our backward preprocess beside FA3's from Nsight Compute reports that hold both kernels (one launch of
each, tools/profile/ncu_preprocess.sh): the metrics that say where a memory-bound kernel's time goes
(DRAM bytes and rates, L2 hits and traffic, sectors per request, occupancy, issue, stalls), then the
raw-page metrics that differ most between the two.

    ncu_preprocess_table.py metrics --ncu NCU --log FILE     # the table's metrics this ncu knows, comma-separated
    ncu_preprocess_table.py table --ncu NCU --logs DIR LABEL=REPORT.ncu-rep [...]   # markdown on stdout

Reads the reports with --print-units base (bytes, seconds, cycles) through tools/profile/ncu_metrics.py's
reader, which gives durations in us and byte counts in MB.
"""
import argparse
import importlib.util
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ncu_metrics", os.path.join(HERE, "ncu_metrics.py"))
nm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nm)

# (group, [(label, metric, divisor metric or None)]): a row is metric, or metric / divisor.
GROUPS = [
    ("time and clocks", [
        ("duration (us)", "gpu__time_duration.sum", None),
        ("SM clock (GHz)", "smsp__cycles_elapsed.avg.per_second", None),
        ("DRAM clock (GHz)", "dram__cycles_elapsed.avg.per_second", None),
        ("SM cycles elapsed", "sm__cycles_elapsed.max", None),
        ("SM active cycles, mean over SMs", "sm__cycles_active.avg", None),
        ("SM active cycles, max over SMs", "sm__cycles_active.max", None),
    ]),
    ("speed of light (% of peak)", [
        ("memory (max of DRAM, L2, L1)", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", None),
        ("DRAM", "dram__throughput.avg.pct_of_peak_sustained_elapsed", None),
        ("L2", "lts__throughput.avg.pct_of_peak_sustained_elapsed", None),
        ("L1", "l1tex__throughput.avg.pct_of_peak_sustained_active", None),
        ("SM", "sm__throughput.avg.pct_of_peak_sustained_elapsed", None),
    ]),
    # Expected: O + dO read (67 MB at d 64 b4 s4k h16, 134 MB at d 128 b2 s8k h16) + lse; the dQ accumulator (as
    # many MB) + D + lse_log2 written, less what is still dirty in L2 when the kernel ends.
    ("DRAM", [
        ("bytes read (MB)", "dram__bytes_read.sum", None),
        ("bytes written (MB)", "dram__bytes_write.sum", None),
        ("read rate (GB/s)", "dram__bytes_read.sum.per_second", None),
        ("write rate (GB/s)", "dram__bytes_write.sum.per_second", None),
    ]),
    ("L2", [
        ("hit rate, all (%)", "lts__t_sector_hit_rate.pct", None),
        ("hit rate, reads (%)", "lts__t_sector_op_read_hit_rate.pct", None),
        ("hit rate, writes (%)", "lts__t_sector_op_write_hit_rate.pct", None),
        ("sectors read by L1", "lts__t_sectors_srcunit_tex_op_read.sum", None),
        ("  of which missed", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", None),
        ("sectors written by L1", "lts__t_sectors_srcunit_tex_op_write.sum", None),
        ("  of which missed", "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum", None),
        ("sectors over the L2 fabric (other partition)", "lts__t_sectors_srcunit_ltcfabric.sum", None),
        ("sectors filled from DRAM", "lts__d_sectors_fill_device.sum", None),
        ("all L2 bytes (MB)", "lts__t_bytes.sum", None),
    ]),
    # 16-byte accesses of a warp over contiguous 512 B: 4 sectors a request; more means misaligned or
    # scattered lanes.
    ("L1 / global accesses", [
        ("load requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", None),
        ("load sectors per request", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
         "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
        ("store requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", None),
        ("store sectors per request", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
         "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
        ("load hit rate in L1 (%)", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct", None),
    ]),
    ("launch and occupancy", [
        ("grid (CTAs)", "launch__grid_size", None),
        ("threads per CTA", "launch__block_size", None),
        ("registers per thread", "launch__registers_per_thread", None),
        ("waves per SM", "launch__waves_per_multiprocessor", None),
        ("CTAs per SM, register limit", "launch__occupancy_limit_registers", None),
        ("theoretical occupancy (%)", "sm__maximum_warps_per_active_cycle_pct", None),
        ("achieved occupancy (%)", "sm__warps_active.avg.pct_of_peak_sustained_active", None),
    ]),
    ("scheduler and warp state", [
        ("instructions executed", "smsp__inst_executed.sum", None),
        ("issue slots busy (%)", "smsp__issue_active.avg.pct_of_peak_sustained_active", None),
        ("active warps per scheduler", "smsp__warps_active.avg.per_cycle_active", None),
        ("eligible warps per scheduler", "smsp__warps_eligible.avg.per_cycle_active", None),
        ("cycles between a warp's instructions", "smsp__average_warp_latency_per_inst_issued.ratio", None),
    ] + [(f"stall {s} (per issue)", nm.STALL_METRIC.format(s), None) for s in nm.STALLS]),
]
# Columns of the raw page that name rather than measure (left out of the largest differences).
NAMING = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device", "CC",
          "Block Size", "Grid Size", "Function Name", "Demangled Name", "_units")
TOP_DIFFS = 40


def table_metrics():
    return [m for _, rows in GROUPS for _, a, b in rows for m in (a, b) if m]


def cmd_metrics(a):
    """Prints the metrics this ncu knows (by base name); nothing when the query fails, so that the
    sections alone are collected rather than ncu refusing an unknown name."""
    known = nm.available_metrics(a.ncu, a.log)
    if known is None:
        print("ncu_preprocess_table: ncu --query-metrics failed: sections only", file=sys.stderr)
        return 0
    keep = [m for m in dict.fromkeys(table_metrics()) if m.split(".")[0] in known]
    dropped = [m for m in dict.fromkeys(table_metrics()) if m not in keep]
    if dropped:
        print("ncu_preprocess_table: not known to this ncu: " + ", ".join(dropped), file=sys.stderr)
    print(",".join(keep))
    return 0


def value(row, metric):
    """A metric of a raw-page row as a number in the table's unit (rates per second scaled to G), or None."""
    if row is None or metric not in row:
        return None
    v = nm.number(row[metric])
    unit = row["_units"].get(metric, "")
    if v is None:
        return None
    if "/" in unit:  # a rate: shown in G per second
        num, den = unit.split("/", 1)
        if den in nm.TIME_UNITS:  # ncu_metrics' tables: time in us, bytes in MB
            if num in nm.BYTE_UNITS:
                return v * nm.BYTE_UNITS[num] / nm.TIME_UNITS[den] * 1e3  # 1 MB per us = 1e3 GB/s
            return v / nm.TIME_UNITS[den] * 1e-3  # a count per us = 1e-3 G per second
    hz = {"hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0}.get(unit.lower())
    return v * hz if hz is not None else v


def shown_unit(unit):
    """The unit of value()'s numbers for a raw-page unit."""
    if unit in nm.BYTE_UNITS:
        return "MB"
    if unit in nm.TIME_UNITS:
        return "us"
    if "/" in unit and unit.split("/", 1)[1] in ("nsecond", "usecond", "msecond", "second"):
        return f"G {unit.split('/', 1)[0]}/s"
    return "GHz" if unit.lower() in ("hz", "khz", "mhz", "ghz") else unit


def cell(row, metric, divisor):
    v = value(row, metric)
    if divisor is None or v is None:
        return v
    d = value(row, divisor)
    return v / d if d else None


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def sides(rows):
    """(ours, fa3) rows of one report: by kernel name, the rows without a telling name in launch order
    (ours first, as bwd_once.py launches them)."""
    found = {}
    rest = []
    for r in rows:
        name = " ".join(str(r.get(k, "")) for k in ("Kernel Name", "Function Name", "Demangled Name"))
        side = "fa3" if "FlashAttnBwdPreprocess" in name else "ours" if "bwd_preprocess_kernel" in name else None
        if side is None:
            rest.append(r)
        else:
            found.setdefault(side, r)
    for side in ("ours", "fa3"):
        if side not in found and rest:
            found[side] = rest.pop(0)
    return found.get("ours"), found.get("fa3")


def ratio(x, y):
    return f"{x / y:.3f}" if x is not None and y not in (None, 0) else "-"


def largest_diffs(ours, fa3):
    """Raw-page metrics whose values differ most (|log ratio|; one side zero counts as largest)."""
    out = []
    for k in ours:
        if k in NAMING or k.startswith(("device__attribute", "profiler__")) or k not in fa3:
            continue
        x, y = value(ours, k), value(fa3, k)
        if x is None or y is None or (x == 0 and y == 0):
            continue
        score = math.inf if x * y <= 0 else abs(math.log(x / y))
        if score > math.log(1.05):
            out.append((score, k, x, y))
    out.sort(key=lambda t: (-t[0], t[1]))
    return out[:TOP_DIFFS]


def report_table(label, rows):
    ours, fa3 = sides(rows)
    lines = [f"## {label}", ""]
    if ours is None or fa3 is None:
        found = ", ".join(str(r.get("Kernel Name", "?"))[:80] for r in rows) or "none"
        return lines + [f"Not both kernels in the report (kernels: {found}).", ""]
    for r, side in ((ours, "ours"), (fa3, "fa3")):
        lines.append(f"- {side}: `{str(r.get('Kernel Name', '?'))[:160]}`")
    lines += ["", "| metric | ours | FA3 | ours / FA3 |", "|---|---|---|---|"]
    for group, specs in GROUPS:
        lines.append(f"| **{group}** | | | |")
        for name, metric, divisor in specs:
            x, y = cell(ours, metric, divisor), cell(fa3, metric, divisor)
            if x is None and y is None:
                continue
            lines.append(f"| {name} | {fmt(x)} | {fmt(y)} | {ratio(x, y)} |")
    diffs = largest_diffs(ours, fa3)
    lines += ["", f"Raw-page metrics differing most (>5 %, top {TOP_DIFFS}):", "",
              "| metric | unit | ours | FA3 | ours / FA3 |", "|---|---|---|---|---|"]
    for _, k, x, y in diffs:
        lines.append(f"| {k} | {shown_unit(ours['_units'].get(k, ''))} | {fmt(x)} | {fmt(y)} | {ratio(x, y)} |")
    return lines + [""]


def cmd_table(a):
    lines = []
    for spec in a.reports:
        label, _, path = spec.partition("=")
        if not os.path.isfile(path):
            lines += [f"## {label}", "", f"No report ({path}): see its ncu log.", ""]
            continue
        log = os.path.join(a.logs, os.path.basename(path) + ".raw.log")
        rows = nm.read_report(a.ncu, path, log, extra=("--print-units", "base"))
        lines += report_table(label, rows)
    print("\n".join(lines))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("metrics")
    m.add_argument("--ncu", required=True)
    m.add_argument("--log", required=True)
    t = sub.add_parser("table")
    t.add_argument("--ncu", required=True)
    t.add_argument("--logs", required=True, help="folder for the raw pages' logs")
    t.add_argument("reports", nargs="+", help="LABEL=REPORT.ncu-rep")
    a = ap.parse_args(argv)
    return cmd_metrics(a) if a.cmd == "metrics" else cmd_table(a)


if __name__ == "__main__":
    sys.exit(main())
