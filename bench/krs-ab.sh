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
# Env: FA3_LIB (libfa3peer.so; default: ../fa3peer/libfa3peer.so beside this tree, as the lead's
# .devwt holds it), GTEST_ROOT (default: ../../.devdeps/gtest), AB_ITERS (40), BUDGET_S (570).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
logs=$(mktemp -d)
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
left() { echo $((${BUDGET_S:-570} - ($(date +%s) - t0))); }
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
gtest_root=${GTEST_ROOT:-../../.devdeps/gtest}
fa3=${FA3_LIB:-../fa3peer/libfa3peer.so}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$logs/gpu.txt"

configure() {  # configure DIR DTYPES DIMS TESTS KRS
  local extra=()
  [ "$4" = ON ] && extra=("-DGTest_DIR=$(cd "$gtest_root" && pwd)/usr/lib/x86_64-linux-gnu/cmake/GTest")
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
    "-DFASTATTN_DTYPES=$2" "-DFASTATTN_HEAD_DIMS=$3" -DFASTATTN_TESTS="$4" -DFASTATTN_GPU_TESTS="$4" \
    -DFASTATTN_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=-DFASTATTN_D128_KRS=$5" "${extra[@]}" >"$logs/cfg-$(basename "$1").log" 2>&1
}
stamp "configure"
configure /tmp/krs-main bf16 128 OFF 0 && configure /tmp/krs-4 bf16 128 OFF 4 && configure /tmp/krs-2 bf16 128 OFF 2 &&
  configure /tmp/krs-t "bf16;fp16" "64;96;128" ON 4 || { tail -20 "$logs"/cfg-*.log; exit 1; }
stamp "build (four trees at once, -j 6 each)"
pids=()
for x in main 4 2; do
  ninja -C /tmp/krs-$x -j 6 src/libfastattn.so >"$logs/build-$x.log" 2>&1 &
  pids+=($!)
done
ninja -C /tmp/krs-t -j 6 fastattn_gpu_tests >"$logs/build-t.log" 2>&1
rc=$?
for p in "${pids[@]}"; do wait "$p" || rc=1; done
grep -H "C7512\|bytes spill" "$logs"/build-*.log >"$OUT/ptxas.txt"
# The changed kernel is bwd_kernel<T, BwdConfig<128, 64>, false, false, false>: no line may name it.
stamp "builds exit $rc; ptxas lines: $(wc -l <"$OUT/ptxas.txt"), naming the changed kernel: $(grep -c \
  'BwdConfigILi128ELi64ELi128EEELb0ELb0ELb0E' "$OUT/ptxas.txt") (expected 0)"
if [ $rc != 0 ]; then
  tail -n 30 "$logs"/build-*.log
  tar -C "$logs" -czf "$OUT/logs.tar.gz" .
  exit 1
fi

stamp "A/B"
cp /tmp/krs-main/src/libfastattn.so "$logs/mainB.so"
fa3_side=()
[ -f "$fa3" ] && fa3_side=(--fa3-lib "$fa3")
timeout 240 python3 bench/ab-pairs.py --lib main=/tmp/krs-main/src/libfastattn.so --lib mainB="$logs/mainB.so" \
  --lib krs4=/tmp/krs-4/src/libfastattn.so --lib krs2=/tmp/krs-2/src/libfastattn.so "${fa3_side[@]}" \
  --iters "${AB_ITERS:-40}" --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal \
  --shape 16,1024,16,128,causal --shape 2,8192,16,128,full 2>&1 | tee "$OUT/ab.txt"

tests=$(find /tmp/krs-t -name fastattn_gpu_tests -type f | head -1)
budget=$(($(left) - 90)); [ "$budget" -gt 240 ] && budget=240; [ "$budget" -lt 60 ] && budget=60
stamp "tests of the krs4 build: Sm90Bwd.* less LargeDims (limit ${budget} s)"
(cd "$(dirname "$tests")" && timeout "$budget" "$tests" --gtest_filter='Sm90Bwd.*:-Sm90Bwd.LargeDims*' >"$logs/tests.log" 2>&1
 echo "tests exit $?" >>"$logs/tests.log")
grep -E "^\[ +(OK|FAILED|PASSED) |FAILED TEST|Failure|tests exit" "$logs/tests.log" | head -60 | tee "$OUT/tests.txt"

budget=$(($(left) - 10))
if [ "$budget" -gt 30 ]; then
  stamp "racecheck of the krs4 build: Sm90Bwd.OddLengths (limit ${budget} s; a timeout leaves it partial)"
  (cd "$(dirname "$tests")" && timeout "$budget" compute-sanitizer --tool racecheck --racecheck-report hazard "$tests" \
     --gtest_filter='Sm90Bwd.OddLengths' >"$logs/race.log" 2>&1
   echo "racecheck exit $?" >>"$logs/race.log")
  grep -E "Race reported|RACECHECK SUMMARY|hazard|PASSED|FAILED|exit" "$logs/race.log" | sort | uniq -c | head -20 |
    tee "$OUT/race.txt"
fi
stamp "done"
tar -C "$logs" --exclude='*.so' -czf "$OUT/logs.tar.gz" .
