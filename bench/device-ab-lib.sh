# Shared parts of the one-call device A/B scripts (bench/krs-ab.sh, bench/krs2-ab.sh), sourced by them: build
# trees of this checkout with compile-time switches, the Sm90Bwd GPU tests of one of them and a racecheck, all in
# one device call of at most BUDGET_S seconds. The caller sets nothing first; after ab_setup it has OUT (results),
# logs (a scratch folder, tarred into $OUT/logs.tar.gz by ab_finish), gtest_root and fa3 (FA3's peer library).
# Env: FA3_LIB (default: ../fa3peer/libfa3peer.so beside the tree, as the lead's .devwt holds it), GTEST_ROOT
# (default: ../../.devdeps/gtest), BUDGET_S (570).

# ab_setup SCRIPT: cd into SCRIPT's tree (the script may be run from the repository root as .devwt/NAME/bench/...).
ab_setup() {
  cd "$(dirname "$1")/.." || exit 1
  OUT=${OUT:-$PWD/out}
  mkdir -p "$OUT"
  logs=$(mktemp -d)
  t0=$(date +%s)
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  gtest_root=${GTEST_ROOT:-../../.devdeps/gtest}
  fa3=${FA3_LIB:-../fa3peer/libfa3peer.so}
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$logs/gpu.txt"
}
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
left() { echo $((${BUDGET_S:-570} - ($(date +%s) - t0))); }

# ab_configure DIR DTYPES DIMS TESTS CUDA_FLAGS: a release tree for sm_90a (TESTS ON: with the GPU tests).
ab_configure() {
  local extra=()
  [ "$4" = ON ] && extra=("-DGTest_DIR=$(cd "$gtest_root" && pwd)/usr/lib/x86_64-linux-gnu/cmake/GTest")
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
    "-DFASTATTN_DTYPES=$2" "-DFASTATTN_HEAD_DIMS=$3" -DFASTATTN_TESTS="$4" -DFASTATTN_GPU_TESTS="$4" \
    -DFASTATTN_TOOLS=OFF "-DCMAKE_CUDA_FLAGS=$5" "${extra[@]}" >"$logs/cfg-$(basename "$1").log" 2>&1 ||
    { tail -20 "$logs/cfg-$(basename "$1").log"; exit 1; }
}

# ab_build TESTDIR LIBDIR...: the libraries and the GPU test binary at once (-j 5 each), ptxas's C7512 / spill
# lines into $OUT/ptxas.txt; exits (logs tarred) if a build fails.
ab_build() {
  local tdir=$1 pids=() rc x
  shift
  stamp "build ($# libraries and the tests at once, -j 5 each)"
  for x in "$@"; do
    ninja -C "$x" -j 5 src/libfastattn.so >"$logs/build-$(basename "$x").log" 2>&1 &
    pids+=($!)
  done
  ninja -C "$tdir" -j 5 fastattn_gpu_tests >"$logs/build-$(basename "$tdir").log" 2>&1
  rc=$?
  for x in "${pids[@]}"; do wait "$x" || rc=1; done
  grep -H "C7512\|bytes spill" "$logs"/build-*.log >"$OUT/ptxas.txt"
  stamp "builds exit $rc; ptxas C7512 / spill lines: $(wc -l <"$OUT/ptxas.txt")"
  if [ $rc != 0 ]; then
    tail -n 30 "$logs"/build-*.log
    tar -C "$logs" -czf "$OUT/logs.tar.gz" .
    exit 1
  fi
}

# ab_tests TESTDIR MAX_S: Sm90Bwd.* less LargeDims, the summary into $OUT/tests.txt.
ab_tests() {
  local tests budget
  tests=$(find "$1" -name fastattn_gpu_tests -type f | head -1)
  budget=$(($(left) - 90)); [ "$budget" -gt "$2" ] && budget=$2; [ "$budget" -lt 60 ] && budget=60
  stamp "tests: Sm90Bwd.* less LargeDims (limit ${budget} s)"
  (cd "$(dirname "$tests")" && timeout "$budget" "$tests" --gtest_filter='Sm90Bwd.*:-Sm90Bwd.LargeDims*' >"$logs/tests.log" 2>&1
   echo "tests exit $?" >>"$logs/tests.log")
  grep -E "^\[ +(OK|FAILED|PASSED) |FAILED TEST|Failure|tests exit" "$logs/tests.log" | head -60 | tee "$OUT/tests.txt"
}

# ab_racecheck TESTDIR FILTER...: each filter in turn with the time left (a timeout leaves it partial), the
# summaries into $OUT/race.txt.
ab_racecheck() {
  local tests budget filter
  tests=$(find "$1" -name fastattn_gpu_tests -type f | head -1)
  shift
  for filter in "$@"; do
    budget=$(($(left) - 10))
    [ "$budget" -gt 30 ] || break
    stamp "racecheck: $filter (limit ${budget} s)"
    (cd "$(dirname "$tests")" && timeout "$budget" compute-sanitizer --tool racecheck --racecheck-report hazard "$tests" \
       --gtest_filter="$filter" >"$logs/race-$filter.log" 2>&1
     echo "racecheck exit $?" >>"$logs/race-$filter.log")
    { echo "== $filter"; grep -E "Race reported|RACECHECK SUMMARY|hazard|PASSED|FAILED|exit" "$logs/race-$filter.log" |
        sort | uniq -c | head -20; } | tee -a "$OUT/race.txt"
  done
}

ab_finish() {
  stamp "done"
  tar -C "$logs" --exclude='*.so' -czf "$OUT/logs.tar.gz" .
}
