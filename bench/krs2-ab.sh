#!/usr/bin/env bash
# One device call for K in registers in the other backward kernels (docs/notes/bwd-sm90.md, "Session 34, K in
# registers in the other backward kernels"): builds this tree's bf16 sm_90a library (d 64 / 96 / 128) three times
#   main  every switch at its default (the new ones 0): every backward kernel main's SASS (fastattn-sass diff)
#   max   each kernel at the most k-steps that compile clean: the 80-row d 128 kernel 1, d 64 4, d 96 6, d 128
#         deterministic 3, d 128 softcap 1, the d 128 64-row kernel 5 with dV waited for before dQ
#   half  d 64 2, d 96 3, d 128 deterministic 2, the d 128 64-row kernel 4 with the dV wait (its cost alone);
#         the 80-row kernel at 0 (a second control for the full shapes)
# and the GPU tests with the max switches (d 64 / 96 / 128, both dtypes); then ab-pairs (main, mainB = main's
# library copied for the A/A control, max, half, fa3 where FA3_LIB names its peer library; FA3's peer has no
# d 96 backward, so its side reads n/a there) on the default-mode shapes and, in deterministic mode (every side,
# FA3's too), d 128 causal; the Sm90Bwd tests (not LargeDims) of the test build and a racecheck of
# Sm90Bwd.OddLengths (d 128 causal: the 64-row kernel, full: the 80-row one), then Sm90Bwd.HeadDimsAndDtypes
# (d 64 / 96 too) with the time left. Run from this tree's root, or from the repository root as
# `bash .devwt/krs2/bench/krs2-ab.sh` (it cds into its own tree). Results under $OUT:
#   ab.txt      ab-pairs lines (ratio = side / main)    tests.txt  gtest summary of the test build
#   race.txt    racecheck summaries                     ptxas.txt  C7512 / spill lines of every build (none expected)
#   logs.tar.gz build logs, the full test and racecheck outputs
# Env: AB_ITERS (40) and device-ab-lib.sh's (FA3_LIB, GTEST_ROOT, BUDGET_S).
set -uo pipefail
source "$(dirname "$0")/device-ab-lib.sh"
ab_setup "$0"

max_flags="-DFASTATTN_D128_R80_KRS=1 -DFASTATTN_D64_KRS=4 -DFASTATTN_D96_KRS=6 -DFASTATTN_D128_DET_KRS=3 \
-DFASTATTN_D128_CAP_KRS=1 -DFASTATTN_D128_KRS=5 -DFASTATTN_D128_KRS_DV_FIRST=1"
half_flags="-DFASTATTN_D64_KRS=2 -DFASTATTN_D96_KRS=3 -DFASTATTN_D128_DET_KRS=2 -DFASTATTN_D128_KRS_DV_FIRST=1"
stamp "configure"
ab_configure /tmp/krs2-main bf16 "64;96;128" OFF ""
ab_configure /tmp/krs2-max bf16 "64;96;128" OFF "$max_flags"
ab_configure /tmp/krs2-half bf16 "64;96;128" OFF "$half_flags"
ab_configure /tmp/krs2-t "bf16;fp16" "64;96;128" ON "$max_flags"
ab_build /tmp/krs2-t /tmp/krs2-main /tmp/krs2-max /tmp/krs2-half

stamp "A/B"
cp /tmp/krs2-main/src/libfastattn.so "$logs/mainB.so"
fa3_side=()
[ -f "$fa3" ] && fa3_side=(--fa3-lib "$fa3")
sides=(--lib main=/tmp/krs2-main/src/libfastattn.so --lib mainB="$logs/mainB.so"
       --lib max=/tmp/krs2-max/src/libfastattn.so --lib half=/tmp/krs2-half/src/libfastattn.so "${fa3_side[@]}")
# d 128 full: the 80-row kernel; d 128 causal: the 64-row one (5 k-steps + the dV wait); d 64 and d 96 both masks.
shapes=()
for d in 128 64 96; do
  for m in full causal; do shapes+=(--shape "2,8192,16,$d,$m" --shape "4,4096,16,$d,$m"); done
done
ab_s=$(($(left) - 170)); [ "$ab_s" -gt 300 ] && ab_s=300; [ "$ab_s" -lt 60 ] && ab_s=60  # the rest: det shapes, tests
timeout "$ab_s" python3 bench/ab-pairs.py "${sides[@]}" --iters "${AB_ITERS:-40}" "${shapes[@]}" 2>&1 | tee "$OUT/ab.txt"
echo "--- deterministic mode (every side)" | tee -a "$OUT/ab.txt"
ab_s=$(($(left) - 140)); [ "$ab_s" -gt 90 ] && ab_s=90; [ "$ab_s" -lt 30 ] && ab_s=30
timeout "$ab_s" python3 bench/ab-pairs.py "${sides[@]}" --iters "${AB_ITERS:-40}" --deterministic \
  --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal 2>&1 | tee -a "$OUT/ab.txt"

ab_tests /tmp/krs2-t 200
ab_racecheck /tmp/krs2-t Sm90Bwd.OddLengths Sm90Bwd.HeadDimsAndDtypes
ab_finish
