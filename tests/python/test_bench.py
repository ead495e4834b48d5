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
