"""tools/profile: the tensor-core inference on hand-made traces, and the timeline PNG from a
synthetic profile (made here, and under ctest also the one the CLI's JSON writer makes)."""

import json
import os
import struct
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "profile"))
import plot_timeline  # noqa: E402
import timeline_model as tm  # noqa: E402


def marks(begin, tiles, turn, issued, scores, masked, soft, pv_done, end):
    return [begin, tiles, turn, issued, scores, masked, soft, pv_done, end]


def two_warpgroup_trace():
    # WG0 issues at 0 and sees S at 100; WG1 takes its turn at 50, but the tensor cores still owe
    # WG0's PV, so WG1's QK can only start after it.
    return {"warpgroups": [
        {"start": 0, "end": 700, "marks": [marks(0, 0, 0, 10, 100, 110, 400, 410, 420)]},
        {"start": 0, "end": 700, "marks": [marks(0, 0, 50, 60, 300, 310, 600, 610, 620)]},
    ]}


def test_tensor_cores_run_jobs_in_issue_order():
    segs = tm.tensor_core_segments(two_warpgroup_trace(), 0, pv=80)
    assert [(s.kind, s.wg, s.start, s.end) for s in segs] == [
        ("qk", 0, 0, 100), ("pv", 0, 100, 180), ("qk", 1, 180, 300), ("pv", 1, 300, 380)]
    assert tm.busy_fraction(segs, 0, 760) == pytest.approx(0.5)


def test_pv_is_capped_where_wait0_saw_it_done():
    segs = tm.tensor_core_segments(two_warpgroup_trace(), 0, pv=10_000)
    assert segs[1].end == 410  # WG0's kPvDone
    assert segs[2].start == 410


def test_pv_defaults_to_the_shortest_qk():
    segs = tm.tensor_core_segments(two_warpgroup_trace(), 0, pv=None)
    assert segs[1].end - segs[1].start == 100  # min(100 - 0, 300 - 50)


def test_warpgroup_regions_tile_the_iteration():
    t = two_warpgroup_trace()
    segs = [s for s in tm.warpgroup_segments(t, 0) if s.row == "wg0"]
    loop = [s for s in segs if s.kind != "prologue"]
    assert [s.kind for s in loop] == tm.REGION_ENDING_AT[1:]
    assert all(a.end == b.start for a, b in zip(loop, loop[1:]))


def synthetic_profile(iters=16, pv_sync=True):
    """A ping-pong schedule with fixed region lengths, in the CLI's JSON format."""
    at = [0, 20, 60, 160, 420, 480, 1500, 1520, 1960]
    def run(pv):
        wgs, totals = [], []
        for wg in range(2):
            t0 = 100_000 + 1000 * wg
            wgs.append({"iterations": iters, "start": t0 - 2500, "end": t0 + iters * 2000 + 900,
                        "marks": [[t0 + 2000 * i + a for a in at] for i in range(iters)],
                        "pv_sync": [t0 + 2000 * i + at[4] + pv for i in range(iters)] if pv else []})
            totals.append({"iterations": iters, "tiles": 1, "iteration_cycles": 2000,
                           "cycles": {}, "average": {"pv_sync": pv}})
        return {"kernel": "k", "ms": 1.0, "output_identical": True, "warpgroups": totals,
                "trace": {"block": [0, 0, 0], "skip": 0, "smid": 3, "warpgroups": wgs}}
    runs = {"pipeline": run(0)}
    if pv_sync:
        runs["pv_sync"] = run(230)
    return {"format": "fastattn-profile/1",
            "problem": {"batch": 4, "seqlen_q": 4096, "heads": 64, "kv_heads": 8, "dim": 128,
                        "dtype": "fp16", "causal": False},
            "kernel": {"block_m": 128, "block_n": 128}, "runs": runs}


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def plot_and_check(profile_path, png, capsys):
    assert plot_timeline.main([str(profile_path), "--out", str(png)]) == 0
    w, h = png_size(png)
    assert w > 1000 and h > 300
    assert "tensor cores busy" in capsys.readouterr().out


@pytest.mark.parametrize("pv_sync", [True, False])
def test_plot_of_a_synthetic_profile(tmp_path, capsys, pv_sync):
    pytest.importorskip("matplotlib")
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(synthetic_profile(pv_sync=pv_sync)))
    plot_and_check(path, tmp_path / "timeline.png", capsys)


def test_plot_of_the_cli_writers_sample(tmp_path, capsys):
    sample = os.environ.get("FASTATTN_PROFILE_SAMPLE")
    if not sample:
        pytest.skip("FASTATTN_PROFILE_SAMPLE not set (ctest sets it)")
    pytest.importorskip("matplotlib")
    profile = json.load(open(sample))
    assert tm.pv_cycles(profile) == pytest.approx(230)
    wg, tc, _ = tm.build(profile)
    assert len(tc) == 2 * 2 * 16  # QK + PV per kept iteration of both warpgroups
    assert profile["runs"]["pipeline"]["warpgroups"][0]["average"]["softmax"] == pytest.approx(1020)
    plot_and_check(sample, tmp_path / "timeline.png", capsys)


def test_rejects_other_json(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(SystemExit):
        plot_timeline.main([str(path), "--out", str(tmp_path / "x.png")])
