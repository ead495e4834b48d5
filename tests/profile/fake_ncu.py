#!/usr/bin/env python3
"""A stand-in for Nsight Compute's `ncu`, enough for scripts/ncu-metrics' and
tools/profile/ncu_preprocess.sh's tests on a machine without a GPU: --version, --query-metrics,
--list-sections, a profiling run that exports a report (the target is not run, except
tools/profile/bwd_once.py with --dry-run: its arguments are checked), and --import --csv --page raw
of that report (other pages: one line). FAKE_NCU_MODE=noperm makes profiling fail like a machine where
counters are restricted, =badmetric rejects any list longer than the core one, =nomatch profiles no
kernel of a mangled-name filter."""

import json
import os
import subprocess
import sys

SECTIONS = ["SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart", "MemoryWorkloadAnalysis_Tables",
            "LaunchStats", "Occupancy", "SchedulerStats", "WarpStateStats"]  # no SourceCounters: the missing path
# What the sections collect when no --metrics list is given.
SECTION_METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum.per_second",
                   "smsp__cycles_elapsed.avg.per_second", "launch__grid_size"]
PREPROCESS = ["void fastattn::sm90::bwd_preprocess_kernel<__nv_bfloat16, fastattn::sm90::BwdStatsLayout<64, 128, true>, "
              "false>(fastattn::cuda_backend::BwdParams)",
              "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<128>, cute::C<64> >, "
              "cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false> >(...)"]


def unit_of(m, base):
    if m.startswith("gpu__time"):
        return "nsecond" if base else "ms"
    if m.endswith(".per_second"):
        return ("byte" if "_bytes" in m else "cycle") + "/second"
    if "_bytes" in m:
        return "byte" if base else "Gbyte"
    return "%"

# One metric the real ncu has is left out of the query, to exercise the "missing" path.
LEFT_OUT = "sm__pipe_tensor_cycles_active"


def main(argv):
    if "--version" in argv:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.0.0 (fake)")
        return 0
    if "--query-metrics" in argv:
        names = json.loads(os.environ["FAKE_NCU_METRICS"])
        print("Device GH100\n----\nMetric Name    Metric Type    Metric Unit    Metric Description")
        for n in names:
            if n.split(".")[0] != LEFT_OUT:
                print(f"{n.split('.')[0]}    Counter    cycle    a fake metric")
        return 0
    if "--list-sections" in argv:
        print("Identifier    Display Name    Enabled    Filename")
        for sec in SECTIONS:
            print(f"{sec}    {sec}    yes    {sec}.section")
        return 0
    if "--import" in argv and "raw" not in argv:
        print("fake page of " + argv[argv.index("--import") + 1])
        return 0
    if "--import" in argv:
        rep = json.load(open(argv[argv.index("--import") + 1]))
        metrics = rep["metrics"]
        cols = ["ID", "Process ID", "Kernel Name"] + metrics
        # ncu 2025.3 (the device's) writes "ms"; older versions "nsecond" (FAKE_NCU_UNITS picks), as does
        # --print-units base (byte counts then in bytes).
        base = "base" in argv
        old_units = os.environ.get("FAKE_NCU_UNITS") == "nsecond" or base
        time_scale = 1000.0 if old_units else 1e-3
        byte_scale = 1e9 if base else 1.0
        units = ["", "", ""] + [unit_of(m, old_units) if m.startswith("gpu__time") else unit_of(m, base) for m in metrics]
        print("==PROF== Connected (fake)")
        print(",".join(f'"{c}"' for c in cols))
        print(",".join(f'"{u}"' for u in units))
        for i, (name, scale) in enumerate(rep["kernels"]):
            vals = [str(time_scale * scale if m.startswith("gpu__time") else
                        round(scale * (1 + k % 7) / 3, 2) * (byte_scale if unit_of(m, base) == "byte" else 1))
                    for k, m in enumerate(metrics)]
            print(",".join(f'"{v}"' for v in [str(i), "42", name] + vals))
        return 0
    # A profiling run.
    if os.environ.get("FAKE_NCU_MODE") == "noperm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
              "Performance Counters on the target device 0.")
        return 1
    rep = argv[argv.index("--export") + 1] + ".ncu-rep"
    metrics = argv[argv.index("--metrics") + 1].split(",") if "--metrics" in argv else SECTION_METRICS
    if os.environ.get("FAKE_NCU_MODE") == "badmetric" and len(metrics) > 5:
        print("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_misc_per_issue_active.ratio")
        return 1
    target = " ".join(argv)
    if "bwd_once.py" in target:  # the preprocess script: its target's arguments must parse
        if os.environ.get("FAKE_NCU_MODE") == "nomatch" and "mangled" in argv:
            print("==WARNING== No kernels were profiled.")
            return 0
        cmd = argv[argv.index("--force-overwrite") + 1:]
        if subprocess.run(cmd + ["--dry-run"]).returncode != 0:
            return 1
        print("==PROF== Profiling \"bwd_preprocess_kernel\" - 0: 0%....100% - 40 passes")
        print("==PROF== Profiling \"device_kernel\" - 1: 0%....100% - 40 passes")
        kernels = [[PREPROCESS[0], 1.1], [PREPROCESS[1], 1.0]]
    elif "cudnn_sdpa.py" in target:  # two kernels in the range: a small one and the attention kernel
        kernels = [["cudnn_small_helper_kernel", 0.01], ["cudnn_generated_sm90_flash_fprop_wgmma_f16", 2.0]]
    elif "fa3_fwd.py" in target:
        kernels = [["void cutlass::device_kernel<flash::enable_sm90<flash::FlashAttnFwdSm90<...> > >(...)", 1.2]]
    else:
        kernels = [["void fastattn::sm90::fwd_kernel<__half, fastattn::sm90::FwdConfig<128> >(...)", 1.5]]
    json.dump({"metrics": metrics, "kernels": kernels}, open(rep, "w"))
    print("==PROF== Report: " + rep)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
