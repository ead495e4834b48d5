"""The timeline of one traced tile, from `fastattn profile`'s JSON (docs/profiling.md).

Per consumer warpgroup, each loop iteration is cut at its probe marks into regions. The
tensor-core row is inferred, because nothing on the SM reports when a wgmma runs:

* the QK of an iteration starts when its warpgroup starts issuing (kTurnTaken), but not before the
  tensor cores finish the previous job of either warpgroup (they execute in issue order), and ends
  when the warpgroup sees its scores (kScoresReady): wait<1> returns as soon as the QK retires;
* the PV issued with it follows the QK and runs for the PV time measured in-pipeline by the PV-sync
  kernel (seed 003, method 3), capped by kPvDone, where wait<0> saw it retired. Without a PV-sync
  run the PV is assumed as long as the shortest QK (the two GEMMs have the same FLOPs).

Pure Python (no matplotlib), so the model is tested on its own.
"""

from dataclasses import dataclass

# Marks inside one iteration, in program order (src/cuda/prof/probe_layout.h).
LOOP_MARKS = ["kIterBegin", "kTilesReady", "kTurnTaken", "kIssued", "kScoresReady",
              "kMasked", "kSoftmaxDone", "kPvDone", "kIterEnd"]
M = {name: i for i, name in enumerate(LOOP_MARKS)}
# The region that ends at mark i (i >= 1): the slot key of the same index.
REGION_ENDING_AT = ["loop_back_edge", "wait_kv", "wait_turn", "issue_mma", "wait_qk",
                    "mask", "softmax", "wait_pv", "rescale"]


@dataclass
class Segment:
    row: str      # "wg0", "wg1" or "tc"
    start: float  # cycles from the origin
    end: float
    kind: str     # a region key, or "qk"/"pv" on the tensor-core row
    wg: int = 0
    iteration: int = 0


def load_trace(profile, run="pipeline"):
    """The traced tile of one run: per warpgroup its start, end and rows of loop marks."""
    r = profile["runs"][run]
    return r["trace"]


def pv_cycles(profile):
    """The PV's time on the tensor cores per iteration, from the PV-sync run; None without one."""
    run = profile["runs"].get("pv_sync")
    if not run:
        return None
    vals = [w["average"]["pv_sync"] for w in run["warpgroups"] if w["iterations"]]
    return sum(vals) / len(vals) if vals else None


def warpgroup_segments(trace, origin):
    """Region segments of both warpgroups: prologue, every kept iteration, the back edges."""
    segs = []
    for wg, w in enumerate(trace["warpgroups"]):
        rows = w["marks"]
        if rows:
            segs.append(Segment(f"wg{wg}", w["start"] - origin, rows[0][0] - origin, "prologue", wg, -1))
        for i, marks in enumerate(rows):
            if i > 0:
                segs.append(Segment(f"wg{wg}", rows[i - 1][-1] - origin, marks[0] - origin,
                                    "loop_back_edge", wg, i))
            for m in range(1, len(LOOP_MARKS)):
                segs.append(Segment(f"wg{wg}", marks[m - 1] - origin, marks[m] - origin,
                                    REGION_ENDING_AT[m], wg, i))
    return segs


def tensor_core_segments(trace, origin, pv=None):
    """QK and PV segments on the shared tensor cores, merged over the two warpgroups in issue order."""
    jobs = []
    for wg, w in enumerate(trace["warpgroups"]):
        for i, marks in enumerate(w["marks"]):
            jobs.append((marks[M["kTurnTaken"]], marks[M["kScoresReady"]], marks[M["kPvDone"]], wg, i))
    jobs.sort()
    if pv is None:  # no PV-sync run: as long as the least-queued QK
        qk = [scores - turn for turn, scores, _, _, _ in jobs]
        pv = min(qk) if qk else 0.0
    segs, free = [], float("-inf")
    for turn, scores, pv_done, wg, i in jobs:
        qk_start = max(turn, free)
        qk_end = max(qk_start, scores)
        pv_end = max(qk_end, min(pv_done, qk_end + pv))
        segs.append(Segment("tc", qk_start - origin, qk_end - origin, "qk", wg, i))
        segs.append(Segment("tc", qk_end - origin, pv_end - origin, "pv", wg, i))
        free = pv_end
    return segs


def busy_fraction(segs, start, end):
    """Share of [start, end) covered by the segments (which do not overlap)."""
    if end <= start:
        return 0.0
    covered = sum(max(0.0, min(s.end, end) - max(s.start, start)) for s in segs)
    return covered / (end - start)


def build(profile, run="pipeline"):
    """Segments of the three rows, with the origin at the earliest warpgroup start."""
    trace = load_trace(profile, run)
    starts = [w["start"] for w in trace["warpgroups"] if w["marks"]]
    if not starts:
        raise ValueError("the profile has no traced iterations (the traced CTA ran no loop iteration; "
                         "try --trace-block / --trace-skip)")
    origin = min(starts)
    pv = pv_cycles(profile)
    return warpgroup_segments(trace, origin), tensor_core_segments(trace, origin, pv), pv
