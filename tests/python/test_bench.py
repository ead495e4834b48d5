"""python -m fastattn.bench on the CPU: outputs written, FLOP counts exact, failures reported."""
import json

import numpy as np
import pytest

import attn_reference as ref
from fastattn.bench import peers as P
from fastattn.bench.__main__ import main
from fastattn.bench.cases import PRESETS, Case, cases_for
from fastattn.bench.report import write_all
from fastattn.bench.run import run_all


@pytest.mark.parametrize("s_q, s_k, causal, window", [
    (64, 64, False, (-1, -1)), (64, 64, True, (-1, -1)), (17, 50, True, (-1, -1)),
    (50, 17, True, (-1, -1)), (100, 100, False, (64, 0)), (33, 70, False, (5, 9)),
    (40, 40, False, (-1, 3)), (40, 40, False, (7, -1)),
])
def test_flops_count_kept_pairs_exactly(s_q, s_k, causal, window):
    case = Case("t", 2, s_q, s_k, 3, 3, 64, causal, window)
    kept = int(ref.keep_mask(s_q, s_k, causal, window).sum())
    assert case.kept_pairs() == kept
    assert case.flops() == 4 * 2 * 3 * 64 * kept
    if not causal and window == (-1, -1):
        assert case.flops() == 4 * 2 * 3 * s_q * s_k * 64


def test_presets_match_issue_shapes():
    hopper = cases_for(["hopper-fwd"])
    assert {c.d for c in hopper} == {64, 128, 256}
    assert {c.s_q for c in hopper} == {1024, 4096, 8192, 16384}
    assert all(c.b * c.s_q == 16384 and c.h * c.d == 2048 and c.dtype == "bfloat16" for c in hopper)
    assert {c.causal for c in hopper} == {False, True}
    gqa = cases_for(["gqa"])
    assert all((c.b, c.s_q, c.h, c.h_kv, c.d, c.dtype) == (4, 4096, 64, 8, 128, "float16") for c in gqa)
    window = cases_for(["sliding-window"])
    assert {c.d for c in window} == {64, 128}
    assert all(c.window == (64, 0) and c.s_q == 8192 and c.b == 2 for c in window)
    with pytest.raises(ValueError, match="unknown preset"):
        cases_for(["nope"])
    assert "quick" in PRESETS and "cpu" in PRESETS


def test_quick_run_writes_table_json_and_plot(tmp_path):
    assert main(["--quick", "--device", "cpu", "--reps", "1", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    cases = cases_for(["cpu-quick"])
    assert len(data["results"]) == len(cases)
    for row in data["results"]:
        assert row["peers"]["fastattn"]["tflops"] > 0
        for name, result in row["peers"].items():  # every other peer computed the same attention
            if name != "fastattn":
                assert result["compared_to"] == "fastattn" and result["max_abs_diff"] < 1e-4
    table = (tmp_path / "results.md").read_text()
    assert "fastattn / " in table and table.count("\n| b1 ") == len(cases)
    png = tmp_path / "results.png"
    if png.exists():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        pytest.importorskip("matplotlib", reason="matplotlib absent: no plot written")
        pytest.fail("matplotlib is installed but no plot was written")


def test_numpy_peer_and_failure_is_reported(tmp_path):
    """Without torch the numpy peer is the baseline; a failing peer is recorded, not fatal."""
    def broken(case, inputs):
        raise NotImplementedError("this peer cannot run")

    table = {"fastattn": P.CPU_NUMPY_PEERS["fastattn"], "numpy": P.CPU_NUMPY_PEERS["numpy"],
             "broken": broken}
    cases = [Case("t", 1, 32, 32, 2, 1, 64, True, dtype="float32")]
    rows = run_all(cases, table, "cpu", None, reps=1, log=lambda *_: None)
    assert rows[0]["peers"]["broken"] == {"error": "NotImplementedError: this peer cannot run"}
    assert rows[0]["peers"]["numpy"]["tflops"] > 0
    assert rows[0]["peers"]["numpy"]["max_abs_diff"] < 1e-4
    meta = {"device": "cpu", "date": "today", "timing": "wall", "unit": "GFLOPS"}
    write_all(str(tmp_path), meta, rows, list(table), "numpy")
    md = (tmp_path / "results.md").read_text()
    assert "broken: NotImplementedError: this peer cannot run" in md


def test_numpy_peer_computes_attention():
    case = Case("t", 1, 24, 40, 4, 2, 32, True, dtype="float32")
    inputs = P.make_inputs(case, "cpu", None, seed=3)
    got = P.CPU_NUMPY_PEERS["numpy"](case, inputs)()
    want, _ = ref.forward(*inputs["bshd"], causal=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rounds_rotate_peers_and_report_ratio_spread(tmp_path):
    """rounds=3: every peer timed once per round (ms = median over rounds), the ratio per round
    with its min-max spread in the table."""
    from fastattn.bench.report import markdown, ratio_stats
    from fastattn.bench.run import rotation

    assert rotation(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert rotation(["a", "b", "c"], 1) == ["b", "c", "a"]
    assert rotation(["a", "b", "c"], 5) == ["c", "a", "b"]
    assert rotation([], 2) == []
    table = {"fastattn": P.CPU_NUMPY_PEERS["fastattn"], "numpy": P.CPU_NUMPY_PEERS["numpy"]}
    cases = [Case("t", 1, 48, 48, 2, 2, 32, True, dtype="float32")]
    rows = run_all(cases, table, "cpu", None, reps=1, log=lambda *_: None, rounds=3)
    for name in table:
        r = rows[0]["peers"][name]
        assert len(r["ms_rounds"]) == 3 and r["ms"] == sorted(r["ms_rounds"])[1]
    row = {"case": {"label": "x"}, "peers": {"fastattn": {"tflops": 2.0, "ms_rounds": [1.0, 2.0, 4.0]},
                                              "base": {"tflops": 1.0, "ms_rounds": [1.5, 2.0, 2.0]}}}
    q = ratio_stats(row, "base")
    assert q["rounds"] == [1.5, 1.0, 0.5] and q["median"] == 1.0 and (q["min"], q["max"]) == (0.5, 1.5)
    meta = {"device": "cpu", "date": "today", "timing": "wall", "unit": "GFLOPS", "rounds": 3}
    md = markdown(meta, [row], ["fastattn", "base"], "base")
    assert "| 1.00 | 0.50-1.50 |" in md and "3 round(s)" in md


# --- bench/run-peers.py: its GPU-free parts (plan, statistics, tables) -------------------------

def _bench_script(file_name, module_name):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / file_name
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports no torch at module level
    return module


def _run_peers():
    return _bench_script("run-peers.py", "run_peers")


@pytest.mark.parametrize("s, causal, window", [
    (256, False, (-1, -1)), (256, True, (-1, -1)), (300, False, (64, 0)), (300, False, (5, 9)),
    (257, False, (-1, 3)), (130, False, (7, -1)),
])
def test_run_peers_pairs_and_block_classes(s, causal, window):
    rp = _run_peers()
    keep = ref.keep_mask(s, s, causal, window)
    assert rp.kept_pairs(s, s, causal, window) == int(keep.sum())
    for bq, bk in ((128, 128), (128, 64), (64, 32)):
        partial = full = 0
        for i in range(0, s, bq):
            for j in range(0, s, bk):
                blk = keep[i:i + bq, j:j + bk]
                if blk.all() and blk.shape == (bq, bk):
                    full += 1
                elif blk.any():
                    partial += 1
        assert rp.block_classes(s, s, causal, window, bq, bk) == (partial, full)


def test_run_peers_keep_mod_is_bottom_right():
    torch = pytest.importorskip("torch")
    rp = _run_peers()
    for s_q, s_k, causal, window in ((40, 40, True, (-1, -1)), (17, 50, True, (-1, -1)), (50, 17, False, (3, 2)),
                                     (64, 64, False, (64, 0)), (33, 70, False, (-1, 4))):
        keep = rp.keep_mod(s_q, s_k, causal, window)
        got = keep(0, 0, torch.arange(s_q)[:, None], torch.arange(s_k)[None, :]).numpy()
        np.testing.assert_array_equal(got, ref.keep_mask(s_q, s_k, causal, window))
    assert rp.keep_mod(8, 8, False, (-1, -1)) is None


def test_run_peers_statistics_and_plan():
    rp = _run_peers()
    assert rp.rotation(list(rp.PEERS), 1)[0] == rp.PEERS[1] and rp.rotation(list(rp.PEERS), len(rp.PEERS)) == list(rp.PEERS)
    assert rp.over_rounds([2.0, None, 1.0, 3.0]) == 2.0 and rp.over_rounds([None]) is None
    q = rp.ratio_stats([1.0, 1.0, 2.0], [1.1, 0.9, None])  # rounds where both ran
    assert q["rounds"] == [1.1, 0.9] and abs(q["median"] - 1.0) < 1e-12 and (q["min"], q["max"]) == (0.9, 1.1)
    assert rp.ratio_stats([None], [1.0]) is None
    assert rp.ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert rp.ranges(list(range(0, 40, 2)), limit=2).endswith("(20 ranges)")
    plan = rp.cases("full")
    assert len(plan) == 27 and len({c["name"] for c in plan}) == 27
    local = [c for c in plan if rp.is_local(c)]
    assert [(c["d"], c["b"], c["s"], c["h"]) for c in local] == [(64, 2, 8192, 32), (128, 2, 8192, 16)]
    # the issue's floor: q, k, v, o of local d128 = 4 * 2*8192*16*128 * 2 bytes
    assert rp.case_bytes(local[1]) == 4 * 2 * 8192 * 16 * 128 * 2
    gqa = [c for c in plan if c["h"] != c["hkv"]][0]
    assert rp.case_bytes(gqa) == 2 * 4 * 4096 * 128 * (2 * 64 + 2 * 8)
    assert not rp.applicable(local[0], "sdpa-cudnn") and rp.applicable(local[0], "flex")
    assert rp.applicable(plan[0], "sdpa-efficient") and not rp.applicable(plan[0], "flex")  # d64 dense
    assert rp.main(["--list"]) == 0


def test_run_peers_markdown_rows_ratio_floor_and_notes():
    rp = _run_peers()
    meta = {"device": "GPU", "date": "today", "commit": "abc", "rounds": 3, "reps": 20, "warmup": 3,
            "timing": "flushed", "copy": {"gbps": 3000.0, "ms": 0.7, "reps": 10}}

    def timed(ms_rounds, flops=1e12, mhz_rounds=None, **extra):
        ms = rp.over_rounds(ms_rounds)
        x = dict(ms=ms, tflops=flops / ms / 1e9, ms_rounds=ms_rounds, **extra)
        if mhz_rounds:
            x.update(mhz=rp.over_rounds(mhz_rounds), mhz_rounds=mhz_rounds)
        return x
    dense = {"case": "dense d128 s8192 causal", "local": False, "bytes": 1, "floor_ms": 1.0,
             "results": {"fastattn": timed([1.0, 1.1, 0.9], mhz_rounds=[1500, 1600, 1400]),
                         "fa3": timed([1.2, 1.2, 1.0], maxdiff=0.003),
                         "ffpa": timed([2.0, 2.2, 1.8], maxdiff=0.005),
                         "sdpa-cudnn": timed([1.1, 1.0, 1.0], mhz_rounds=[1500, 1760, None], maxdiff=0.004),
                         "sdpa-efficient": {"error": rp.LEFT_OUT + "time", "excluded": True},
                         "sdpa-flash": {"error": "boom", "excluded": True},
                         "flex": {"maxdiff": 4.5, "wrong": "max |diff| 4.5 at (b=0, i=0, h=0)"},
                         "cudnn-bhsd": timed([1.2, 1.2, 1.2], maxdiff=0.004)},
             "ratio": rp.ratio_stats([1.0, 1.1, 0.9], [1.1, 1.0, 1.0]),
             "ratio_bhsd": rp.ratio_stats([1.0, 1.1, 0.9], [1.2, 1.2, 1.2]),
             "ratio_fa3": rp.ratio_stats([1.2, 1.2, 1.0], [1.1, 1.0, 1.0]),
             "vs_fa3": rp.ratio_stats([1.0, 1.1, 0.9], [1.2, 1.2, 1.0]),
             "vs_ffpa": rp.ratio_stats([1.0, 1.1, 0.9], [2.0, 2.2, 1.8])}
    dense["cycle_ratio"] = rp.cycle_ratio(dense["results"]["fastattn"], dense["results"]["sdpa-cudnn"])
    # rounds with both clocks: 1.1*1500 / (1.0*1500) = 1.1, 1.0*1760 / (1.1*1600) = 1.0; round 3 has no cuDNN clock
    assert [round(x, 9) for x in dense["cycle_ratio"]["rounds"]] == [1.1, 1.0]
    nbytes = 4 * 2 * 8192 * 16 * 128 * 2
    floor = nbytes / 3000.0 / 1e6
    local = {"case": "local(64,0) d128 s8192", "local": True, "bytes": nbytes, "floor_ms": floor,
             "results": {"fastattn": timed([0.11, 0.1, 0.12], flops=9e9),
                         "flex": timed([0.2, 0.2, 0.2], flops=9e9, maxdiff=0.008, variant="contiguous copies")}}
    md = rp.markdown(meta, [dense, local, {"case": "gqa", "missing": "not run (worker stopped)"}])
    assert "| ratio | spread | ratio bhsd | fa3 ratio | vs fa3 | vs ffpa | MHz | cycle ratio | maxdiff |" in md
    assert "4*b*h_q*d*kept_pairs" in md and "Absent peers" not in md
    row = next(line for line in md.splitlines() if line.startswith("| dense d128 s8192 causal"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "1000 (1.000)" and cells[2] == "833 (1.200)"
    assert cells[3] == "-"  # fa4: no result (its wheel absent)
    assert cells[4] == "500 (2.000)"  # ffpa
    assert cells[6] == "crashed" and cells[7] == "left out" and cells[8] == "wrong output"  # --exclude: left out
    assert cells[10:13] == ["1.10", "0.91-1.11", "1.20"]  # per round 1.1/1.0, 1.0/1.1, 1.0/0.9
    # fa3 ratio: cuDNN/fa3 per round 1.1/1.2, 1.0/1.2, 1.0; vs fa3: fa3/ours 1.2, 1.2/1.1, 1.0/0.9
    assert cells[13:15] == ["0.92", "1.11"]
    assert cells[15] == "2.00"  # vs ffpa: ffpa/ours 2.0/1.0, 2.2/1.1, 1.8/0.9
    assert cells[16:18] == ["1500 / 1630", "1.05"]  # median clocks; median of the cycle ratios 1.1, 1.0
    assert "Copy bandwidth: 3000 GB/s" in md and f"| {floor:.4f} | 0.1100 | {0.11 / floor:.2f} |" in md
    assert "wrong output: max |diff| 4.5" in md and "sdpa-flash: boom" in md and "timed on contiguous copies" in md
    assert "not run (worker stopped)" in md


def test_run_peers_clock_sampling_from_first_start_to_last_end():
    rp = _run_peers()

    class Event:  # completes after `after` queries
        def __init__(self, after):
            self.left = after

        def query(self):
            self.left -= 1
            return self.left < 0

    class FakeNvml:
        handle = object()

        def __init__(self, readings):
            self.readings = iter(readings)

        def sm_mhz(self):
            return next(self.readings)

    worker = rp.Worker.__new__(rp.Worker)  # no torch, no CUDA: only the sampling loop
    worker.nvml = FakeNvml([1980, None, 1500, 1600, 1700])
    # the last call ends on its 4th query: 4 readings, one of them failed (None)
    assert worker.sample_clock(Event(2), Event(3)) == 1600
    worker.nvml = rp.Nvml.__new__(rp.Nvml)
    worker.nvml.handle = None
    assert worker.sample_clock(Event(0), Event(0)) is None


def test_run_peers_ffpa_column_absent_refused_and_timed(tmp_path, monkeypatch, capsys):
    """FFPA's column: which cases reach it, '-' with the reason when the wheel does not import, n/a when
    FFPA's own validator refuses the shape, and the op it times (on a stand-in package: no GPU here)."""
    import sys
    import types
    rp = _run_peers()
    splitd = rp.cases("splitd")
    assert [c["d"] for c in splitd] == [320, 320, 512, 512, 1024, 1024]
    assert all(rp.applicable(c, "ffpa") for c in splitd) and not any(rp.applicable(c, "ffpa", smoke=True) for c in splitd)
    assert not any(rp.applicable(c, "ffpa") for c in rp.cases("full") + rp.cases("dv"))  # d <= 256, windows
    assert "ffpa" in rp.PEERS and "ffpa" not in rp.BWD_PEERS

    # not importable: the worker loads it once, at the first case it applies to, prints and records why
    monkeypatch.setattr(sys, "path", list(sys.path))  # site.addsitedir appends to it
    empty = tmp_path / "empty"
    empty.mkdir()
    worker = rp.Worker.__new__(rp.Worker)  # no torch, no CUDA: only the loading
    worker.args, worker.cuda, worker.ffpa, worker.ffpa_why = types.SimpleNamespace(ffpa_site=str(empty)), True, None, None
    events = []
    worker.emit = lambda **e: events.append(e)
    assert worker.load_ffpa() is None and worker.load_ffpa() is None
    why = "ModuleNotFoundError: No module named 'ffpa_attn'"
    assert events == [dict(type="absent", peer="ffpa", why=why)]
    assert capsys.readouterr().out.count("ffpa: column skipped") == 1
    meta = {"device": "GPU", "date": "today", "commit": "abc", "rounds": 1, "reps": 10, "warmup": 3, "timing": "x",
            "absent": {"ffpa": why}}
    res = {"fastattn": dict(ms=1.0, tflops=1000.0, ms_rounds=[1.0])}
    md = rp.markdown(meta, [dict(case=splitd[2]["name"], local=False, results=res)])
    line = next(x for x in md.splitlines() if x.startswith("| dense d512 s8192 full"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[rp.PEERS.index("ffpa") + 1] == "-" and cells[len(rp.PEERS) + 6] == "-"  # its cell, vs ffpa
    assert f"Absent peers (column '-'): ffpa: {why}." in md

    # importable: a stand-in ffpa_attn whose validator refuses d < 320 as FFPA's does
    site = tmp_path / "site"
    (site / "ffpa_attn" / "cute").mkdir(parents=True)
    (site / "ffpa_attn" / "__init__.py").write_text("")
    (site / "ffpa_attn" / "cute" / "__init__.py").write_text(
        "def _require_cute_supported(q, k, v, *, requires_grad):\n"
        "    if not 320 <= q.shape[-1] <= 1024:\n"
        "        raise NotImplementedError(f'cutedsl backend only supports dense head_dim in [320, 1024]; got {q.shape[-1]}')\n")
    try:
        ffpa, none = rp.Ffpa.load(str(site))
        assert none is None and ffpa is not None
        calls = []
        fake_torch = types.SimpleNamespace(ops=types.SimpleNamespace(ffpa_attn=types.SimpleNamespace(
            _fwd_cute=lambda *a: (calls.append(a) or "out", "lse"))))
        q, k, v = (types.SimpleNamespace(shape=(1, 17, 2, 512)) for _ in range(3))
        run = ffpa.forward_fn(fake_torch, q, k, v, True)
        assert calls == [] and run() == "out"  # nothing runs before the call
        assert len(calls) == 1 and calls[0][:3] == (q, k, v) and calls[0][3:] == (512 ** -0.5, 1, 0)  # (b, s, h, d) as is
        small = types.SimpleNamespace(shape=(1, 17, 2, 128))
        with pytest.raises(rp.Refused, match="FFPA: cutedsl backend only supports dense head_dim in .320, 1024.; got 128"):
            ffpa.forward_fn(fake_torch, small, small, small, False)
    finally:
        for name in [m for m in sys.modules if m == "ffpa_attn" or m.startswith("ffpa_attn.")]:
            del sys.modules[name]


def test_run_peers_backward_plan_bytes_and_rounds():
    rp = _run_peers()
    plan = rp.bwd_cases("full")
    names = [c["name"] for c in plan]
    assert len(set(names)) == len(names) == 17
    det = [c for c in plan if c["det"]]
    assert [(c["d"], c["s"], c["b"], c["h"], c["causal"]) for c in det] == [(128, 8192, 2, 16, False),
                                                                           (128, 8192, 2, 16, True)]
    assert all(rp.applicable_bwd(c, "fastattn-det") for c in det)
    assert not rp.applicable_bwd(plan[2], "fastattn-det") and not rp.applicable_bwd(plan[2], "fa3-det", smoke=False)
    local = [c for c in plan if rp.is_local(c)][0]
    assert not rp.applicable_bwd(local, "sdpa-cudnn") and rp.applicable_bwd(local, "flex")
    # the issue's floor: q, k, v, o, dO, dq, dk, dv (bf16) and lse (fp32) of local d128 s8192 b2 h16
    assert rp.bwd_bytes(local) == 8 * 2 * 8192 * 16 * 128 * 2 + 4 * 2 * 16 * 8192
    gqa = [c for c in plan if c["h"] != c["hkv"]]
    assert [c["causal"] for c in gqa] == [False, True] and gqa[0]["dtype"] == "float16"
    assert rp.bwd_flops(plan[0]) == 2.5 * 4 * 2 * 16 * 128 * 8192 * 8192
    assert rp.bwd_flops(plan[1]) == 2.5 * 4 * 2 * 16 * 128 * 8192 * 8193 // 2
    assert {c["d"] for c in plan if c["s"] == 1024} == {64, 128, 256}
    # a round's backward time: direct, or (fwd+bwd) - fwd; None when a part is missing or not positive
    assert rp.Worker.bwd_round({"bwd": [1.5, None]}, 0) == 1.5 and rp.Worker.bwd_round({"bwd": [1.5, None]}, 1) is None
    assert rp.Worker.bwd_round({"fwd": [1.0, 1.0], "fwdbwd": [3.5, None]}, 0) == 2.5
    assert rp.Worker.bwd_round({"fwd": [1.0], "fwdbwd": [0.9]}, 0) is None
    assert rp.main(["--mode", "backward", "--list"]) == 0


def test_run_peers_backward_markdown():
    rp = _run_peers()
    meta = {"device": "GPU", "date": "today", "commit": "abc", "rounds": 3, "reps": 20, "warmup": 3,
            "timing": "flushed", "copy": {"gbps": 3000.0, "ms": 0.7, "reps": 10}}
    flops = 1e12

    def timed(ms_rounds, **extra):
        ms = rp.over_rounds(ms_rounds)
        return dict(ms=ms, tflops=flops / ms / 1e9, ms_rounds=ms_rounds, **extra)
    res = {"fastattn": timed([1.0, 1.0, 1.0], fwdbwd_ms=1.4),
           "fastattn-det": timed([1.1, 1.1, 1.2], maxdiff=0.0),
           "fa3": timed([1.2, 1.1, 1.3], maxdiff=0.01, fwdbwd_ms=1.6),
           "sdpa-cudnn": timed([1.3, 1.3, 1.3], maxdiff=0.01, fwdbwd_ms=1.8),
           "sdpa-flash": {"maxdiff": 0.5, "wrong": "dq: max |diff| 3 (max |fastattn| 6)"},
           "flex": {"error": "boom"}}
    row = {"case": "dense d128 s8192 causal", "local": False, "bytes": 1, "floor_ms": 1.0, "results": res,
           "ratio": rp.ratio_stats(res["fastattn"]["ms_rounds"], res["sdpa-cudnn"]["ms_rounds"]),
           "vs_fa3": rp.ratio_stats(res["fastattn"]["ms_rounds"], res["fa3"]["ms_rounds"]),
           "det_cost": rp.ratio_stats(res["fastattn"]["ms_rounds"], res["fastattn-det"]["ms_rounds"])}
    nbytes = rp.bwd_bytes(dict(b=2, s=8192, h=16, hkv=16, d=128))
    local = {"case": "local(64,0) d128 s8192", "local": True, "bytes": nbytes, "floor_ms": nbytes / 3000.0 / 1e6,
             "results": {"fastattn": timed([0.5, 0.5, 0.5])}}
    md = rp.markdown_bwd(meta, [row, local, {"case": "gqa", "missing": "not run (worker stopped)"}])
    line = next(x for x in md.splitlines() if x.startswith("| dense d128 s8192 causal"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:3] == ["1000 (1.000)", "909 (1.100)"] and cells[3] == "833 (1.200)" and cells[4] == "-"
    assert cells[5] == "-"  # fa4: no result (its wheel absent)
    assert cells[7] == "wrong grads" and cells[9] == "err"
    assert cells[10:13] == ["1.30", "1.30-1.30", "1.20"] and cells[14] == "1.10"  # ratio, spread, vs fa3, det cost
    assert cells[16] == "1.400 / 1.800 / 1.600"
    assert f"| {nbytes / 1e6:.0f} | {nbytes / 3000.0 / 1e6:.4f} | 0.5000 |" in md
    assert "2.5 x forward" in md and "wrong gradients: dq" in md and "flex: boom" in md


def test_run_peers_dv_preset_flops_bytes_and_refusals():
    """d 192 with d_v 128: FLOPs 2*b*h*(d + d_v)*pairs, bytes with v, o (and dO, dv) at d_v, n/a cells."""
    rp = _run_peers()
    for plan, mode in ((rp.cases("dv"), "forward"), (rp.bwd_cases("dv"), "backward")):
        assert [(c["b"], c["s"], c["h"], c["d"], c["dv"], c["causal"]) for c in plan] == [
            (2, s, 16, 192, 128, causal) for s in (4096, 8192) for causal in (False, True)]
        assert [c["name"] for c in plan][:2] == ["dense d192/128 s4096 full", "dense d192/128 s4096 causal"]
        assert all(rp.applicable(c, p) for c in plan for p in ("sdpa-cudnn", "sdpa-flash", "fa3"))
        assert all((rp.applicable_bwd if mode == "backward" else rp.applicable)(c, "flex") for c in plan)
        assert rp.main(["--mode", mode, "--preset", "dv", "--list"]) == 0
    full, causal = rp.cases("dv")[:2]
    assert rp.case_flops(full) == 2 * 2 * 16 * (192 + 128) * 4096 * 4096
    assert rp.case_flops(causal) == 2 * 2 * 16 * (192 + 128) * 4096 * 4097 // 2
    assert rp.bwd_flops(full) == 2.5 * rp.case_flops(full)
    assert rp.case_bytes(full) == 2 * 2 * 4096 * 16 * (192 + 192 + 128 + 128)  # q, k at d; v, o at d_v
    assert rp.bwd_bytes(full) == 2 * 2 * 4096 * 16 * (4 * 192 + 4 * 128) + 4 * 2 * 16 * 4096
    # d_v = d: the old rule, 4*b*h*d*pairs
    dense = rp.cases("full")[0]
    assert dense["dv"] == dense["d"] and rp.case_flops(dense) == 4 * dense["b"] * dense["h"] * dense["d"] * dense["s"] ** 2
    assert all(c["dv"] == c["d"] for c in rp.cases("full") + rp.bwd_cases("full"))
    assert rp.v_dim(dict(d=64)) == 64 and rp.dims_label(full) == "d192/128" and rp.dims_label(dense) == "d64"
    meta = {"device": "GPU", "date": "today", "commit": "abc", "rounds": 1, "reps": 20, "warmup": 3, "timing": "x"}
    why = "Flash attention requires q,k,v to have the same last dimension"
    res = {"fastattn": dict(ms=1.0, tflops=344.0, ms_rounds=[1.0]), "sdpa-flash": dict(na=why)}
    for md in (rp.markdown(meta, [dict(case=full["name"], local=False, results=res)]),
               rp.markdown_bwd(meta, [dict(case=full["name"], local=False, results=res)])):
        line = next(x for x in md.splitlines() if x.startswith("| dense d192/128 s4096 full"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert "n/a" in cells and f"sdpa-flash: n/a: {why}" in md


def test_run_peers_exclude_argument_is_checked():
    import argparse
    rp = _run_peers()
    assert rp.exclude_arg("3:flex=slow compile") == "3:flex=slow compile"
    assert rp.exclude_arg("0:fa3-det=x=y") == "0:fa3-det=x=y"  # the reason may hold '='
    for bad in ("3:flex", "flex=slow", "x:flex=slow", "3:=why", "3:nope=why", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            rp.exclude_arg(bad)


def test_ab_pairs_shapes_and_ratio_quantiles():
    ab = _bench_script("ab-pairs.py", "ab_pairs")
    assert ab.parse_shape("2,8192,16,128,causal") == (2, 8192, 16, 16, 128, 128, True, (-1, -1), "causal")
    assert ab.parse_shape("1,17,3,64,full") == (1, 17, 3, 3, 64, 64, False, (-1, -1), "full")
    assert ab.parse_shape("2,8192,16,128,w64:0") == (2, 8192, 16, 16, 128, 128, False, (64, 0), "w64:0")
    assert ab.parse_shape("1,300,2,64,w-1:20") == (1, 300, 2, 2, 64, 64, False, (-1, 20), "w-1:20")
    assert ab.parse_shape("4,4096,64/8,128,causal") == (4, 4096, 64, 8, 128, 128, True, (-1, -1), "causal")
    assert ab.parse_shape("1,113,4/1,64,full") == (1, 113, 4, 1, 64, 64, False, (-1, -1), "full")
    assert ab.parse_shape("2,4096,16,192/128,causal") == (2, 4096, 16, 16, 192, 128, True, (-1, -1), "causal")
    assert ab.parse_shape("1,17,4/2,64/32,full") == (1, 17, 4, 2, 64, 32, False, (-1, -1), "full")
    for bad in ("2,8192,16,128", "2,8192,16,128,diag", "2,8192,16,128,w64", "2,x,16,128,causal",
                "2,8192,16,128,w64:x", "2,8192,16,128,w64:0:1", "0,8192,16,128,full", "1,64,1,64,w-2:0",
                "1,64,6/4,64,full", "1,64,4/0,64,full", "1,64,4/,64,full", "1,64,/4,64,full",
                "1,64,4,192/,full", "1,64,4,/128,full", "1,64,4,192/0,full", "1,64,4,192/128/64,full"):
        with pytest.raises(SystemExit):
            ab.parse_shape(bad)
    lib = __file__  # any existing file stands for a library here
    assert ab.parse_lib(f"x={lib}") == ("x", lib, False)
    assert ab.parse_lib(f"x={lib}@det") == ("x", lib, True)
    for bad in (lib, f"={lib}", "x=@det", "x=/no/such/lib.so", "x=/no/such/lib.so@det"):
        with pytest.raises(SystemExit):
            ab.parse_lib(bad)
    # TFLOPS by run-peers' rule: forward 2*b*h*(d + dv)*pairs, causal s(s+1)/2 pairs; backward 2.5 x
    rp = _run_peers()
    assert ab.shape_flops(rp, 2, 4096, 16, 192, 128, False, (-1, -1), True) == 2 * 2 * 16 * 320 * 4096 * 4096
    assert ab.shape_flops(rp, 2, 4096, 16, 192, 128, True, (-1, -1), True) == 2 * 2 * 16 * 320 * 4096 * 4097 // 2
    assert ab.shape_flops(rp, 1, 64, 2, 128, 128, False, (-1, -1), False) == 2.5 * 4 * 2 * 128 * 64 * 64
    xs = [1.0, 4.0, 2.0, 3.0, 5.0]
    assert ab.quantile(xs, 0.0) == 1.0 and ab.quantile(xs, 1.0) == 5.0
    assert ab.quantile(xs, 0.5) == 3.0 and ab.quantile(xs, 0.25) == 2.0
    assert ab.quantile([1.0, 2.0], 0.5) == 1.5


def test_bias_ab_arguments_and_ratios():
    ab = _bench_script("bias_ab.py", "bias_ab")
    lib = __file__  # any existing file stands for a library here
    args = ab.parse_args(["--lib", f"base={lib}", "--lib", f"new={lib}", "--mode", "bwd", "--d", "128,64"])
    assert args.libs == [["base", lib], ["new", lib]] and args.mode == "bwd" and args.dims == [128, 64]
    for bad in ([f"--lib={lib}"], ["--lib", "x"], ["--lib", "x=/no/such/lib.so"],
                ["--lib", f"a={lib}", "--lib", f"a={lib}"], ["--lib", f"dense={lib}"],
                ["--lib", f"a={lib}", "--rounds", "0"], ["--lib", f"a={lib}", "--d", "128,x"],
                ["--lib", f"a={lib}", "--mode", "both"]):
        with pytest.raises(SystemExit):
            ab.parse_args(bad)
    # x / base: the median of per-round ratios (not the ratio of medians), with the rounds' min-max
    times = {"base": [1.0, 2.0, 4.0], "new": [0.5, 3.0, 2.0]}
    assert ab.ratio_cells(times, ["base", "new"]) == ["0.500 (0.500-1.500)"]


def test_alibi_bench_arguments_and_term():
    al = _bench_script("alibi_bench.py", "alibi_bench")
    args = al.parse_args(["--lib", "x.so", "--d", "128,64", "--mode", "fwd"])
    assert args.dims == [128, 64] and args.modes == ["fwd"] and args.rounds == 7
    for bad in ([], ["--lib", "x.so", "--mode", "both"], ["--lib", "x.so", "--d", "12x"]):
        with pytest.raises(SystemExit):
            al.parse_args(bad)
    torch = pytest.importorskip("torch")
    slopes = al.alibi_slopes(torch, 8, device="cpu")
    assert [float(x) for x in slopes] == [2.0 ** -(i + 1) for i in range(8)]  # FA's slopes at 8 heads
    s_q, s_k = 5, 9
    term = al.alibi_term(torch, slopes, s_q, s_k)
    assert term.shape == (1, 8, s_q, s_k)
    for h, i, j in ((0, 0, 0), (3, 4, 8), (7, 2, 0), (5, 1, 7)):
        assert float(term[0, h, i, j]) == -float(slopes[h]) * abs(i + s_k - s_q - j)


def test_alibi_plot_reads_the_bench_tables(tmp_path):
    ap = _bench_script("alibi_plot.py", "alibi_plot")
    run = tmp_path / "run.md"
    run.write_text("# ALiBi, b 4 ...\n\nfwd d 128 causal 0\n\n| side | ms | TFLOPS | x alibi | diff |\n|---|---:|---:|---:|---:|\n"
                   "| fastattn alibi | 7.5 | 580.1 | 1.000 | 0 |\n| flex score_mod | 11.5 | 383.0 | 1.5 | 0.01 |\n\n"
                   "bwd d 128 causal 1 (TFLOPS: ...)\n\n| side | ms | TFLOPS | x | diff |\n|---|---:|---:|---:|---:|\n"
                   "| fastattn alibi bwd | 9.5 | 579.0 | 1.000 | 0 |\n| fastattn alibi fwd | 3.2 | 679.1 | 0.34 | - |\n")
    assert ap.read_tables(str(run)) == [("fwd d128 full", [("fastattn alibi", 7.5, 580.1), ("flex score_mod", 11.5, 383.0)]),
                                        ("bwd d128 causal", [("fastattn alibi bwd", 9.5, 579.0)])]
    assert [t for t, _ in ap.read_tables(str(run), "bwd")] == ["bwd d128 causal"]
    with pytest.raises(SystemExit):
        ap.main([str(tmp_path / "x.png"), f"{run}:both"])


def test_decode_plot_reads_runs_and_refuses_disjoint_ones(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib absent: bench/decode_plot.py imports it at module level")
    dp = _bench_script("decode_plot.py", "decode_plot")
    run = tmp_path / "run.md"
    run.write_text("# Decode ...\nsq=1 b=1 sk=4096 floor=4.0 fastattn=11.4 fastattn-1=41.0 diff-1=0.0005 cudnn=11.0 diff-cudnn=0.0005\n"
                   "| 1 | 1 | 4096 | 4.0 | 11.4 (2.86x) | ...\nsq=1 b=8 sk=32768 floor=256.5 fastattn=242.0 fastattn-1=326.5 "
                   "diff-1=0.0002 cudnn=243.9 diff-cudnn=0.0001\n")
    assert dp.read_run(str(run)) == {(1, 4096): {"fastattn": 11.4, "cudnn": 11.0, "floor": 4.0},
                                     (8, 32768): {"fastattn": 242.0, "cudnn": 243.9, "floor": 256.5}}
    dp.main([str(tmp_path / "d.png"), f"a={run}", f"b={run}"])
    assert (tmp_path / "d.png").stat().st_size > 0
    other = tmp_path / "other.md"
    other.write_text("sq=1 b=2 sk=4096 floor=8.0 fastattn=15.0 cudnn=14.0\n")
    with pytest.raises(SystemExit):
        dp.main([str(tmp_path / "e.png"), f"a={run}", f"b={other}"])
    # --peers: the last run's FA3 / FlashInfer bars, refused where a case lacks the peer
    peers = tmp_path / "peers.md"
    peers.write_text("sq=1 b=1 sk=4096 floor=4.1 fastattn=10.7 fa3=13.3 cudnn=11.1 fi=29.6 fi-tc=14.0\n"
                     "sq=4 b=1 sk=4096 floor=4.2 fastattn=11.1 fa3=13.5 cudnn=52.5\n")
    assert dp.read_run(str(peers)) == {(1, 4096): {"fastattn": 10.7, "cudnn": 11.1, "floor": 4.1, "fa3": 13.3,
                                                   "fi": 29.6, "fi-tc": 14.0}}
    dp.main([str(tmp_path / "p.png"), f"s50={peers}", "--peers", "fa3,fi-tc"])
    assert (tmp_path / "p.png").stat().st_size > 0
    with pytest.raises(SystemExit):
        dp.main([str(tmp_path / "q.png"), f"a={run}", "--peers", "fi-tc"])


def test_decode_cases_take_the_axes_given():
    dec = _bench_script("decode.py", "decode_bench")
    assert dec.cases(True) == [(1, b, sk) for b in (1, 8, 64) for sk in (4096, 32768)]
    assert len(dec.cases(False)) == 3 * 4 * 5
    # s_q 4 / 16 beside FA3 (issue #30) in one call: the full set's batches and lengths cut to a few
    assert dec.cases(False, sqs=(4, 16), batches=(1, 8), sks=(4096,)) == [(4, 1, 4096), (4, 8, 4096), (16, 1, 4096),
                                                                        (16, 8, 4096)]
    assert dec.cases(True, sks=(8192,)) == [(1, 1, 8192), (1, 8, 8192), (1, 64, 8192)]
    assert dec.int_list("4, 16") == (4, 16)
    assert dec.int_list(None) is None
    import argparse

    for bad in ("", "0", "4,-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            dec.int_list(bad)
    with pytest.raises(ValueError):
        dec.int_list("x")


def test_run_peers_args_mirror_c_api_layout(tmp_path):
    # fastattn_args_init writes the whole fastattn_args: a shorter ctypes mirror (block_mask missing)
    # had it write past the Python object, and fastattn_forward read block_mask from beyond it
    import ctypes
    import pathlib
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to read c_api.h's layout")
    root = pathlib.Path(__file__).resolve().parents[2]
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "fastattn/c_api.h"\n'
                   'int main(void) { printf("%zu %zu %zu %zu %zu %zu\\n", sizeof(fastattn_args), '
                   'sizeof(fastattn_tensor), sizeof(fastattn_block_mask), offsetof(fastattn_args, block_mask), '
                   'sizeof(fastattn_bit_mask), offsetof(fastattn_args, bit_mask)); '
                   'printf("%zu %zu %zu\\n", offsetof(fastattn_args, bias), offsetof(fastattn_args, dbias), '
                   'offsetof(fastattn_args, alibi_slopes)); return 0; }\n')
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", str(root / "include"), str(src), "-o", str(exe)], check=True)
    sizes = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    rp = _run_peers()
    assert sizes == [ctypes.sizeof(rp.FaArgs), ctypes.sizeof(rp.FaTensor), ctypes.sizeof(rp.FaBlockMask),
                     rp.FaArgs.block_mask.offset, ctypes.sizeof(rp.FaBitMask), rp.FaArgs.bit_mask.offset,
                     rp.FaArgs.bias.offset, rp.FaArgs.dbias.offset, rp.FaArgs.alibi_slopes.offset]


def test_decode_flashinfer_peer_is_optional(monkeypatch, capsys):
    # bench/decode.py --flashinfer: a missing wheel (or a dependency failing at import) leaves FlashInfer's columns
    # '-' with the reason printed, instead of stopping the run; an importable one is returned as is
    import sys
    import types

    dec = _bench_script("decode.py", "decode_bench")
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import raises ImportError
    assert dec.load_flashinfer() is None
    assert "flashinfer: not importable (ModuleNotFoundError" in capsys.readouterr().out
    fake = types.ModuleType("flashinfer")
    fake.__version__ = "0.0-test"
    monkeypatch.setitem(sys.modules, "flashinfer", fake)
    assert dec.load_flashinfer() is fake
    assert dec.FI_PAGE % 16 == 0  # FlashInfer's pages here: the cache viewed without a copy
