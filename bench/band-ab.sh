#!/usr/bin/env bash
# The recompute band's device call (docs/notes/bwd-sm90.md, session 34): build this tree's d 128
# library and GPU tests (sm_90a, both dtypes), run the band's tests beside the window / ring tests,
# compute-sanitizer memcheck on one small band case, then time the band against the dQ ring with
# bench/ab-pairs.py (the calls of both sides interleaved in one process).
#
# usage (repository root, on the device; carry .devdeps/gtest): bash bench/band-ab.sh [all | tests | ab]
#   tests: build, memcheck, tests (each test run bounded by what is left of 570 s); ab: build (a no-op
#   on a warm machine that ran `tests`) and the timings (~1-2 min); all: both (may pass one call's
#   600 s: run the two parts as two calls).
# Results under $OUT: build.log, memcheck.txt, tests.txt (the band's), tests-others.txt (tests);
# ab.txt (B = 4: the default), ab-widths.txt (B = 2 and 8) (ab); summary.txt (both).
#
# One library serves both sides: the host reads FASTATTN_BWD_BAND at every call (0: the band off, the
# window goes through the ring as on main). ab-pairs loads each side's library apart, but the
# environment is the process's, so the ring side is a byte copy of the same library whose variable's
# name reads FASTATTN_BWD_BANX (set to 0): same code, the band off; FASTATTN_BWD_RING_SLOTS=512 sends
# its windows to the ring (the host's default since session 35 is the accumulator path there). A
# second copy of the band library is an A/A side.
set -uo pipefail
part=${1:-all}
OUT=${OUT:-/tmp/band-ab}
mkdir -p "$OUT"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
B=build-band
log() { echo "$*" | tee -a "$OUT/summary.txt"; }

start=$(date +%s)
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 \
  -DFASTATTN_TESTS=ON -DFASTATTN_TOOLS=OFF -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest \
  >"$OUT/build.log" 2>&1 &&
  cmake --build $B -j "$(nproc)" --target fastattn fastattn_gpu_tests >>"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; log "build failed"; exit 1; }
log "build: $(($(date +%s) - start)) s"

T=$B/tests/gpu/fastattn_gpu_tests
if [[ $part == all || $part == tests ]]; then
  # memcheck first (one small case, ~1 min), then the tests in what is left of a 600 s call.
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='Sm90Bwd.BandSmall' \
    >"$OUT/memcheck.txt" 2>&1
  log "memcheck rc $? ($(grep -m1 'ERROR SUMMARY' "$OUT/memcheck.txt")): $(($(date +%s) - start)) s"
  # The band's tests and its route check first, then the window paths beside it (the ring with the band
  # off), each in what is left of a 600 s call. A d 128 build: the suites with d 64 / 96 cases
  # (LocalWindows, Gqa, GraphReplay) are the full gpu-check's.
  run_tests() {  # FILE FILTER
    local left=$((570 - ($(date +%s) - start)))
    ((left < 60)) && left=60
    timeout $left $T --gtest_filter="$2" >"$OUT/$1" 2>&1
    log "$1 rc $? (timeout $left s; $(grep -c '^\[       OK' "$OUT/$1") ok, $(grep -c '^\[  FAILED' "$OUT/$1") failed lines): $(($(date +%s) - start)) s"
  }
  run_tests tests.txt 'Sm90Bwd.Band*:Sm90BwdStats.D128Band'
  run_tests tests-others.txt \
    'Sm90BwdStats.D128Ring:Sm90BwdStats.D128Rows64:Sm90Bwd.DqRingWindows:Sm90Bwd.OddLengths:Sm90Bwd.HugeWindowEdges'
fi
[[ $part == all || $part == ab ]] || exit 0

LIB=$B/src/libfastattn.so
DIR=/tmp/band-sides  # not under $OUT: the libraries need not come back
mkdir -p $DIR
cp "$LIB" "$DIR/band-a.so"
cp "$LIB" "$DIR/band-b.so"
# LIB copied to $1 with one environment variable's name $2 renamed $3 (same length), so that only
# that copy reads the renamed one.
rename_env() {
  python3 - "$LIB" "$1" "$2" "$3" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
old, new = sys.argv[3].encode() + b"\0", sys.argv[4].encode() + b"\0"
assert len(old) == len(new) and data.count(old) == 1, f"{sys.argv[3]}: appears {data.count(old)} times"
open(sys.argv[2], "wb").write(data.replace(old, new))
EOF
}
rename_env "$DIR/ring.so" FASTATTN_BWD_BAND FASTATTN_BWD_BANX                # FASTATTN_BWD_BANX=0: the ring
export FASTATTN_BWD_BANX=0 FASTATTN_BWD_RING_SLOTS=512
SIDES="--lib ring=$DIR/ring.so --lib band=$DIR/band-a.so --lib band_aa=$DIR/band-b.so"
# ring first: every ratio printed is side / ring (< 1: faster than the ring).
timeout 200 python3 bench/ab-pairs.py $SIDES --iters 40 \
  --shape 2,8192,16,128,w64:0 --shape 2,4096,16,128,w64:0 --shape 2,8192,16,128,w32:0 \
  --shape 2,8192,16/2,128,w64:0 --shape 1,8192,16,128,w1:0 >"$OUT/ab.txt" 2>&1
log "ab (B 4) rc $?: $(($(date +%s) - start)) s"
for width in 2 8; do
  echo "## FASTATTN_BWD_BAND=$width" >>"$OUT/ab-widths.txt"
  FASTATTN_BWD_BAND=$width timeout 100 python3 bench/ab-pairs.py --lib ring=$DIR/ring.so --lib band=$DIR/band-a.so \
    --iters 40 --shape 2,8192,16,128,w64:0 >>"$OUT/ab-widths.txt" 2>&1
done
log "ab widths: $(($(date +%s) - start)) s"
grep -h "|" "$OUT/ab.txt" "$OUT/ab-widths.txt" >>"$OUT/summary.txt"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >>"$OUT/summary.txt" 2>&1
