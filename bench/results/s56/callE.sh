#!/usr/bin/env bash
# Session 56, call E (NVIDIA H200), carry [".devdeps"]: is the paged narrow decode's extra (paged / contiguous
# 1.07-1.15 at b1 4k-16k, b4 4k, no token appended) the paged TMA map's shape? Call B ran the rows-shaped map
# (branch s56cand's pagedrows: the pool read as one sequence of rows, the contiguous cache's map shape) over
# shuffled pages only, where it read slower; session 55's in-order run kept the pages-as-batch map. Here both maps
# over pages in sequence order (the same bytes at the same addresses as the contiguous cache) and shuffled, three
# rounds alternating, main's tree beside main + bench/results/s56/rows-src.patch (FASTATTN_PAGED_ROWS_MAP=0|1), and
# the split kernel's stamps (-DFASTATTN_SPLIT_STAMPS) of the patched tree: contiguous and both maps, in order.
# Then KvCacheSm80.* on an "80"-only build (call C's ran without an append image on the H200: the shared kernels
# now carry compute_80 PTX in such a build), which runs session 56's append change as compute_80 code.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
rm -rf /tmp/rows && mkdir /tmp/rows && cp -a src include tests cli tools cmake CMakeLists.txt scripts /tmp/rows/ 2>/dev/null
(cd /tmp/rows && patch -s -p1 < "$OLDPWD/bench/results/s56/rows-src.patch") && echo "rows tree patched"
cfg() {  # SRC BUILD EXTRA_FLAGS
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
    -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
    "-DCMAKE_CUDA_FLAGS=$3" "-DCMAKE_CXX_FLAGS=$3" "$G" > "$OUT/cfg-$(basename $2).log" 2>&1 &&
    ninja -C "$2" -j 5 fastattn_kvcache_bench > "$OUT/build-$(basename $2).log" 2>&1
  echo "build $(basename $2) rc $?"
}
cfg . /tmp/b-main "" & cfg /tmp/rows /tmp/b-rows "" & cfg /tmp/rows /tmp/b-stamps -DFASTATTN_SPLIT_STAMPS & wait
grep -h "spill" "$OUT"/build-*.log | head; el built
cmake -S . -B /tmp/b-80 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=80 \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/cfg-80.log" 2>&1 &&
  ninja -C /tmp/b-80 -j 16 fastattn_gpu_tests > "$OUT/build-80.log" 2>&1
echo "build 80 rc $?"; el "built 80"
M=/tmp/b-main/tests/gpu/fastattn_kvcache_bench; R=/tmp/b-rows/tests/gpu/fastattn_kvcache_bench
for r in 1 2 3; do
  for order in in-order shuffled; do
    arg=""; [ $order = in-order ] && arg=in-order
    for side in main map0 map1; do
      B=$R; m=1; [ $side = main ] && B=$M; [ $side = map0 ] && m=0
      FASTATTN_PAGED_ROWS_MAP=$m timeout 60 $B 64 $arg no-append batches=1,4 > "$OUT/$side-$order-$r.md" 2>&1
      echo "$side $order round $r rc $?"; grep '^| [0-9]' "$OUT/$side-$order-$r.md" | head -5
    done
  done
done
el bench
S=/tmp/b-stamps/tests/gpu/fastattn_kvcache_bench
for m in 0 1; do
  FASTATTN_PAGED_ROWS_MAP=$m FASTATTN_STAMP_GHZ=1.98 timeout 60 $S 64 in-order no-append stamps batches=1 > "$OUT/stamps-map$m.txt" 2>&1
  echo "stamps map$m rc $?"; cat "$OUT/stamps-map$m.txt"
done
el stamps
T=/tmp/b-80/tests/gpu/fastattn_gpu_tests
timeout 150 $T --gtest_filter='KvCacheSm80.*' > "$OUT/tests-80.log" 2>&1
echo "KvCacheSm80 rc $?"; grep -E '^\[ +(PASSED|FAILED) |FAILED  ' "$OUT/tests-80.log"; el "tests 80"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='KvCacheSm80.AppendRotaryOddLengths' > "$OUT/memcheck-80.log" 2>&1
echo "memcheck rc $?"; tail -1 "$OUT/memcheck-80.log"; el memcheck
tar czf "$OUT/callE.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callE.tgz | xargs rm -f)
