#!/usr/bin/env python3
"""A stand-in for Nsight Compute's `ncu`, enough for scripts/ncu-metrics' tests on a machine
without a GPU: --version, --query-metrics, a profiling run that exports a report (the target is
not run), and --import --csv --page raw of that report. FAKE_NCU_MODE=noperm makes profiling fail
like a machine where counters are restricted, =badmetric rejects any list longer than the core one."""

import json
import os
import sys

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
    if "--import" in argv:
        rep = json.load(open(argv[argv.index("--import") + 1]))
        metrics = rep["metrics"]
        cols = ["ID", "Process ID", "Kernel Name"] + metrics
        # ncu 2025.3 (the device's) writes "ms"; older versions "nsecond". FAKE_NCU_UNITS picks.
        old_units = os.environ.get("FAKE_NCU_UNITS") == "nsecond"
        time_unit, time_scale = ("nsecond", 1000.0) if old_units else ("ms", 1e-3)
        units = ["", "", ""] + [time_unit if m.startswith("gpu__time") else "Gbyte" if "_bytes" in m else "%"
                                for m in metrics]
        print("==PROF== Connected (fake)")
        print(",".join(f'"{c}"' for c in cols))
        print(",".join(f'"{u}"' for u in units))
        for i, (name, scale) in enumerate(rep["kernels"]):
            vals = [str(time_scale * scale if m.startswith("gpu__time") else round(scale * (1 + k % 7) / 3, 2))
                    for k, m in enumerate(metrics)]
            print(",".join(f'"{v}"' for v in [str(i), "42", name] + vals))
        return 0
    # A profiling run.
    if os.environ.get("FAKE_NCU_MODE") == "noperm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
              "Performance Counters on the target device 0.")
        return 1
    rep = argv[argv.index("--export") + 1] + ".ncu-rep"
    metrics = argv[argv.index("--metrics") + 1].split(",")
    if os.environ.get("FAKE_NCU_MODE") == "badmetric" and len(metrics) > 5:
        print("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_misc_per_issue_active.ratio")
        return 1
    target = " ".join(argv)
    if "cudnn_sdpa.py" in target:  # two kernels in the range: a small one and the attention kernel
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
