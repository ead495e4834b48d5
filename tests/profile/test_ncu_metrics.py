"""scripts/ncu-metrics (tools/profile/ncu_metrics.py) against a fake ncu: the side-by-side table,
the metric filter, the choice of the longest kernel, and a clear note instead of a failure when
ncu is missing or cannot read the counters."""

import json
import os
import stat
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "profile"))
import ncu_metrics  # noqa: E402

GQA = "--batch 4 --seqlen 4096 --heads 64 --kv-heads 8 --dim 128 --no-causal --dtype fp16"


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    fake_ncu = os.path.join(ROOT, "tests", "profile", "fake_ncu.py")
    ncu = executable(tmp_path / "ncu", f'#!/bin/sh\nexec "{sys.executable}" "{fake_ncu}" "$@"\n')
    metrics = [m for _, m in ncu_metrics.HEADLINE] + [ncu_metrics.STALL_METRIC.format(s) for s in ncu_metrics.STALLS]
    monkeypatch.setenv("NCU", ncu)
    monkeypatch.setenv("FAKE_NCU_METRICS", json.dumps(metrics))
    monkeypatch.delenv("FAKE_NCU_MODE", raising=False)
    monkeypatch.delenv("FASTATTN_FA3_LIB", raising=False)  # gpu-check exports it: no FA3 column unless asked
    return {"out": str(tmp_path / "out"), "fastattn": executable(tmp_path / "fastattn", "#!/bin/sh\nexit 0\n")}


def run(fake, *cases):
    args = ["--out", fake["out"], "--fastattn", fake["fastattn"]]
    for name, flags in cases:
        args += ["--case", name, flags]
    assert ncu_metrics.main(args) == 0
    md = open(os.path.join(fake["out"], "ncu.md")).read()
    return md, json.load(open(os.path.join(fake["out"], "ncu.json")))


def test_side_by_side_table(fake):
    md, report = run(fake, ("gqa", GQA), ("causal", "--batch 2 --seqlen 8192 --heads 16 --dim 128 --causal"))
    assert "### gqa: b=4 s=4096 h=64/8 d=128 float16" in md
    assert "### causal: b=2 s=8192 h=16/4 d=128 bfloat16 causal" in md
    assert "| kernel | `fastattn::sm90::fwd_kernel<__half, fastattn::sm90::FwdConfig<128> >` |" \
           " `cudnn_generated_sm90_flash_fprop_wgmma_f16` |" in md  # the longer of the two cuDNN kernels
    assert "| duration (us) | 1.50 | 2 |" in md  # ms in the report (ncu 2025.3), us in the table
    assert "| achieved occupancy, % of peak warps |" in md
    assert md.count("| stall `") >= ncu_metrics.TOP_STALLS
    assert "Not in this ncu's metric list, left out: sm__pipe_tensor_cycles_active" in md
    assert len(report["cases"]) == 2 and report["cases"][0]["fastattn"]["Kernel Name"].startswith("void fastattn")
    assert os.path.exists(os.path.join(fake["out"], "gqa-fastattn.ncu-rep"))


def test_fa3_third_column(fake, tmp_path):
    """--fa3-lib adds FlashAttention-3's kernel between ours and cuDNN's (the library is not loaded
    here: the fake ncu does not run its target)."""
    args = ["--out", fake["out"], "--fastattn", fake["fastattn"], "--fa3-lib", str(tmp_path / "libfa3peer.so"),
            "--case", "gqa", GQA, "--case", "local", "--batch 2 --seqlen 8192 --heads 16 --dim 128 --window 64,0"]
    assert ncu_metrics.main(args) == 0
    md = open(os.path.join(fake["out"], "ncu.md")).read()
    assert "## Nsight Compute: fastattn vs FA3 and cuDNN" in md
    assert "| metric | fastattn | FA3 | cuDNN (SDPA) |\n|---|---:|---:|---:|\n" in md
    assert "`cutlass::device_kernel<flash::enable_sm90<flash::FlashAttnFwdSm90<...> > >` |" in md
    assert "| duration (us) | 1.50 | 1.20 | 2 |" in md
    assert "FA3: not run (bench/fa3 builds no window or softcap kernels)" in md
    assert os.path.exists(os.path.join(fake["out"], "gqa-fa3.ncu-rep"))


def test_old_time_units_are_converted_too(fake, monkeypatch):
    """ncu before 2025.3 wrote nsecond/usecond/msecond, 2025.3 writes ns/us/ms: both end in us."""
    monkeypatch.setenv("FAKE_NCU_UNITS", "nsecond")
    md, _ = run(fake, ("gqa", GQA))
    assert "| duration (us) | 1.50 | 2 |" in md


def test_byte_counts_are_megabytes(fake):
    """ncu scales byte counts' unit to the value (here Gbyte): the table shows megabytes."""
    _, report = run(fake, ("gqa", GQA))
    row = report["cases"][0]["fastattn"]
    asked = [m for _, m in ncu_metrics.HEADLINE if m not in report["missing_metrics"]]
    k = asked.index("lts__t_bytes.sum")
    raw_gb = round(1.5 * (1 + k % 7) / 3, 2)  # fake_ncu's value for the kernel of scale 1.5
    assert abs(float(row["lts__t_bytes.sum"]) - 1000 * raw_gb) < 1e-6


def test_counters_not_readable_is_a_note_not_a_failure(fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "noperm")
    md, report = run(fake, ("gqa", GQA))
    assert "fastattn: ncu cannot read the GPU performance counters here (ERR_NVGPUCTRPERM" in md
    assert "cuDNN: ncu cannot read the GPU performance counters here" in md
    assert report["cases"][0]["fastattn"] is None
    assert "| kernel | `not profiled` | `not profiled` |" in md


def test_rejected_metric_list_falls_back_to_the_core_metrics(fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "badmetric")
    md, report = run(fake, ("gqa", GQA))
    assert "fastattn: only the core metrics (the full list failed: ==ERROR== Failed to find metric" in md
    assert "| duration (us) | 1.50 | 2 |" in md
    assert "stall `" not in md


def test_no_ncu(fake, monkeypatch):
    monkeypatch.setattr(ncu_metrics, "find_ncu", lambda: None)
    md, report = run(fake, ("gqa", GQA))
    assert "ncu not found" in md and report["cases"] == []


def test_window_and_softcap_skip_cudnn(fake):
    md, _ = run(fake, ("local", "--seqlen 8192 --window 64,0"))
    assert "cuDNN: not run (SDPA has no local window or softcap)" in md


def test_problem_of_run_flags():
    c = ncu_metrics.parse_case(GQA)
    assert (c["b"], c["s"], c["sk"], c["h"], c["hkv"], c["d"], c["dtype"], c["causal"]) == \
           (4, 4096, 4096, 64, 8, 128, "float16", False)
    d = ncu_metrics.parse_case("")  # the CLI's GPU default problem
    assert (d["b"], d["s"], d["h"], d["hkv"], d["d"], d["dtype"], d["causal"]) == (4, 4096, 32, 8, 128, "bfloat16", True)
