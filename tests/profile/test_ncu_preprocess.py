"""tools/profile/ncu_preprocess.sh (with bwd_once.py and ncu_preprocess_table.py) against a fake ncu
(tests/profile/fake_ncu.py): the reports and the side-by-side table, the retries when ncu rejects the
metric list or the mangled-name filter selects nothing, the driver's argument checks, and the kernel
filters against the real mangled names of both libraries' preprocess kernels."""

import json
import os
import re
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "profile", "ncu_preprocess.sh")
sys.path.insert(0, os.path.join(ROOT, "tools", "profile"))
import ncu_preprocess_table  # noqa: E402


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def env(tmp_path):
    fake_ncu = os.path.join(ROOT, "tests", "profile", "fake_ncu.py")
    e = dict(os.environ)
    for k in ("FAKE_NCU_MODE", "FAKE_NCU_UNITS", "NCU_PRE_SHAPES", "NCU_PRE_CLOCKS"):
        e.pop(k, None)
    (tmp_path / "libfastattn.so").write_text("")
    (tmp_path / "libfa3peer.so").write_text("")
    e.update(NCU=executable(tmp_path / "ncu", f'#!/bin/sh\nexec "{sys.executable}" "{fake_ncu}" "$@"\n'),
             OUT=str(tmp_path / "out"), FASTATTN_LIB=str(tmp_path / "libfastattn.so"),
             FA3_LIB=str(tmp_path / "libfa3peer.so"),
             FAKE_NCU_METRICS=json.dumps(ncu_preprocess_table.table_metrics()))
    return e


def run(env, **extra):
    p = subprocess.run(["bash", SCRIPT], env={**env, **extra}, cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


def test_reports_and_table(env):
    rc, log = run(env)
    assert rc == 0, log
    out = env["OUT"]
    names = ["d64-base", "d64-none", "d128-base", "d128-none"]
    assert sorted(os.listdir(out)) == sorted([n + ".ncu-rep" for n in names] + ["summary.md", "logs.tar.gz"])
    md = open(os.path.join(out, "summary.md")).read()
    for n in names:
        assert f"## {n} (" in md
    # The fake gives ours 1.1 x FA3's duration; in base units (ns) read back as us.
    assert "| duration (us) | 1.1 | 1 | 1.100 |" in md
    # DRAM bytes in MB and rates in GB/s from the fake's base units (bytes, bytes / second).
    rep = json.load(open(os.path.join(out, "d64-base.ncu-rep")))
    k = rep["metrics"].index("dram__bytes_read.sum")
    assert f"| bytes read (MB) | {ncu_preprocess_table.fmt(round(1.1 * (1 + k % 7) / 3, 2) * 1e3)} |" in md
    k = rep["metrics"].index("dram__bytes_write.sum.per_second")
    assert f"| write rate (GB/s) | {ncu_preprocess_table.fmt(round(1.1 * (1 + k % 7) / 3, 2) * 1e-9)} |" in md
    def fake(m):  # the fake's value of metric m at scale 1.1 (ours)
        return round(1.1 * (1 + rep["metrics"].index(m) % 7) / 3, 2)
    per_request = fake("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") / fake("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    assert f"| store sectors per request | {ncu_preprocess_table.fmt(per_request)} |" in md
    assert "bwd_preprocess_kernel<__nv_bfloat16" in md and "FlashAttnBwdPreprocess<" in md
    assert "no section SourceCounters" in log
    # Both kernels profiled per run, after 2 warm-up calls of each side.
    assert log.count("2 launch(es) profiled") == 4


def test_rejected_metrics_then_sections_alone(env):
    rc, log = run(env, FAKE_NCU_MODE="badmetric", NCU_PRE_SHAPES="d128=2,8192,16,128,causal", NCU_PRE_CLOCKS="none")
    assert rc == 0, log
    assert "again without the extra metrics" in log
    assert "| duration (us) | 1.1 | 1 | 1.100 |" in open(os.path.join(env["OUT"], "summary.md")).read()


def test_no_match_falls_back_to_demangled_names(env):
    rc, log = run(env, FAKE_NCU_MODE="nomatch", NCU_PRE_SHAPES="d64=4,4096,16,64,causal", NCU_PRE_CLOCKS="base")
    assert rc == 0, log
    assert "again with the demangled-name filter" in log
    assert os.path.exists(os.path.join(env["OUT"], "d64-base.ncu-rep"))


def test_no_counters_is_a_failed_run(env):
    rc, log = run(env, FAKE_NCU_MODE="noperm", NCU_PRE_SHAPES="d64=4,4096,16,64,causal", NCU_PRE_CLOCKS="base")
    assert rc == 1
    assert "d64-base: no report" in log and "again" not in log  # no retry can help without counters
    assert "No report" in open(os.path.join(env["OUT"], "summary.md")).read()


def test_driver_checks_its_arguments(env):
    drv = [sys.executable, os.path.join(ROOT, "tools", "profile", "bwd_once.py"), "--lib", env["FASTATTN_LIB"]]
    ok = subprocess.run(drv + ["--fa3-lib", env["FA3_LIB"], "--shape", "4,4096,16,64,causal", "--dry-run"],
                        stdout=subprocess.PIPE, text=True)
    assert ok.returncode == 0 and "ours, fa3" in ok.stdout
    for bad in (["--shape", "4,4096,16,64,causal", "--dry-run"],  # fa3 side without its library
                ["--shape", "4,4096,16,64", "--side", "ours", "--dry-run"],  # no mode
                ["--shape", "4,4096,16,64,causal", "--side", "ours", "--calls", "0", "--dry-run"]):
        assert subprocess.run(drv + bad, stdout=subprocess.PIPE, stderr=subprocess.PIPE).returncode != 0, bad


# Mangled names as cuobjdump prints them (our build of f5457f4, bench/fa3's libfa3peer.so); OTHERS: near
# misses (other dtype, head dim or kernel; the last two shortened).
OURS = "_ZN8fastattn4sm9021bwd_preprocess_kernelI13__nv_bfloat16NS0_14BwdStatsLayoutILi{}ELi{}ELb{}EEELb{}EEEvNS_12cuda_backend9BwdParamsE"
FA3 = ("_ZN7cutlass13device_kernelIN5flash22FlashAttnBwdPreprocessIN4cute5tupleIJNS3_1CILi{}EEENS5_ILi{}EEEEEENS_{}EfNS_4arch"
       "4Sm90ELb1ELb0EEEEEvNT_6ParamsE")
OTHERS = [
    OURS.format(64, 128, 1, 0).replace("13__nv_bfloat16", "6__half"),
    OURS.format(96, 64, 0, 0), OURS.format(256, 64, 0, 0),
    FA3.format(128, 64, "6half_t"), FA3.format(64, 256, "10bfloat16_t"),
    "_ZN8fastattn4sm9010bwd_kernelI13__nv_bfloat16NS0_9BwdConfigILi64ELi128ELb0EEEEEvNS_12cuda_backend9BwdParamsE",
    "_ZN7cutlass13device_kernelIN5flash32FlashAttnBwdPostprocessConvertdQIN4cute5tupleIJNS3_1CILi128EEENS5_ILi64EEEEEE"
    "NS_10bfloat16_tEfNS_4arch4Sm90ELi256EEEEEvNT_6ParamsE",
]


def filter_of(d):
    """The script's mangled-name filter for head dim d (its filter_of line, evaluated here)."""
    line = next(l for l in open(SCRIPT) if l.startswith("filter_of()"))
    return re.search(r'echo "(.*)"; }', line).group(1).replace("${1}", str(d))


@pytest.mark.parametrize("d,want", [
    (64, [OURS.format(64, 128, 1, 0), FA3.format(128, 64, "10bfloat16_t")]),
    (128, [OURS.format(128, 64, 0, 0), OURS.format(128, 64, 0, 1), OURS.format(128, 80, 0, 0),
           FA3.format(64, 128, "10bfloat16_t"), FA3.format(80, 128, "10bfloat16_t")]),
])
def test_filters_select_the_preprocess_of_the_head_dim(d, want):
    every = want + OTHERS + [OURS.format(64, 128, 1, 0), OURS.format(128, 64, 0, 0), FA3.format(128, 64, "10bfloat16_t"),
                             FA3.format(64, 128, "10bfloat16_t")]
    got = sorted({n for n in every if re.search(filter_of(d), n)})
    assert got == sorted(set(want))
