#!/usr/bin/env bash
# One device call for FASTATTN_D128_KRS (docs/notes/bwd-sm90.md, "Session 34, K in registers for S^T"):
# builds this tree's d 128 bf16 sm_90a library three times (main: the switch at 0, whose backward kernels
# are main's SASS, checked with fastattn-sass diff; krs4 and krs2: K's fragments of 4 / 2 of S^T's 8
# k-steps in registers) and the GPU tests with the switch at 4 (d 64 / 96 / 128, both dtypes: the
# Sm90Bwd cases name all three dims); then ab-pairs (main, mainB = main's library copied, for the A/A
# control, krs4, krs2, fa3 where FA3_LIB names its peer library), the Sm90Bwd tests (not LargeDims) of the
# test build, and a racecheck of Sm90Bwd.OddLengths (causal and full, odd lengths) with the time left.
# Run from this tree's root, or from the repository root as `bash .devwt/krs/bench/krs-ab.sh` (it cds
# into its own tree). Results under $OUT:
#   ab.txt      ab-pairs lines (ratio = side / main)       tests.txt  gtest summary of the krs4 build
#   race.txt    racecheck summary                           ptxas.txt  C7512 / spill lines of every build
#                                                           (none may name the 64-row d 128 kernel)
#   logs.tar.gz build logs, the full test and racecheck outputs
# Env: AB_ITERS (40) and device-ab-lib.sh's (FA3_LIB, GTEST_ROOT, BUDGET_S).
set -uo pipefail
source "$(dirname "$0")/device-ab-lib.sh"
ab_setup "$0"

stamp "configure"
ab_configure /tmp/krs-main bf16 128 OFF -DFASTATTN_D128_KRS=0
ab_configure /tmp/krs-4 bf16 128 OFF -DFASTATTN_D128_KRS=4
ab_configure /tmp/krs-2 bf16 128 OFF -DFASTATTN_D128_KRS=2
ab_configure /tmp/krs-t "bf16;fp16" "64;96;128" ON -DFASTATTN_D128_KRS=4
ab_build /tmp/krs-t /tmp/krs-main /tmp/krs-4 /tmp/krs-2
# The changed kernel is bwd_kernel<T, BwdConfig<128, 64>, false, false, false>: no line may name it.
stamp "ptxas lines naming the changed kernel: $(grep -c 'BwdConfigILi128ELi64ELi128EEELb0ELb0ELb0E' "$OUT/ptxas.txt") (expected 0)"

stamp "A/B"
cp /tmp/krs-main/src/libfastattn.so "$logs/mainB.so"
fa3_side=()
[ -f "$fa3" ] && fa3_side=(--fa3-lib "$fa3")
timeout 240 python3 bench/ab-pairs.py --lib main=/tmp/krs-main/src/libfastattn.so --lib mainB="$logs/mainB.so" \
  --lib krs4=/tmp/krs-4/src/libfastattn.so --lib krs2=/tmp/krs-2/src/libfastattn.so "${fa3_side[@]}" \
  --iters "${AB_ITERS:-40}" --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal \
  --shape 16,1024,16,128,causal --shape 2,8192,16,128,full 2>&1 | tee "$OUT/ab.txt"

ab_tests /tmp/krs-t 240
ab_racecheck /tmp/krs-t Sm90Bwd.OddLengths
ab_finish
