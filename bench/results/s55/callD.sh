#!/usr/bin/env bash
# Session 55, call D (NVIDIA H200): the paged GPU tests call C did not reach (its test step timed out after 35
# passes) on a 90a build of every head dim with the page entries fetched ahead, the combine tests; then a probe
# (bench/results/s55/probe-arith-pages.patch, -DFASTATTN_PROBE_ARITH_PAGES, d 128 bf16; valid for pages in
# sequence order only): the producer's box taken from the block's row by arithmetic, no smem box, against the same
# tree without the probe, kvcache_bench page 64 in-order: what is left of the paged extra once the producer's
# page work is gone is the paged TMA map's.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
rm -rf /tmp/probe && mkdir /tmp/probe && cp -a src include tests cli tools cmake CMakeLists.txt scripts /tmp/probe/ 2>/dev/null
(cd /tmp/probe && patch -s -p1 < "$OLDPWD/bench/results/s55/probe-arith-pages.patch") && echo "probe patched"
cmake -S /tmp/probe -B /tmp/build-probe -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  -DCMAKE_CUDA_FLAGS=-DFASTATTN_PROBE_ARITH_PAGES > "$OUT/cfg-probe.log" 2>&1 && ninja -C /tmp/build-probe -j 5 fastattn_kvcache_bench > "$OUT/build-probe.log" 2>&1 &
cmake -S . -B build-c -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-c -j 13 fastattn_gpu_tests fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; grep -i "spill\|error" "$OUT/build.log" | head; el built
T=build-c/tests/gpu/fastattn_gpu_tests
timeout 240 $T --gtest_filter='KvCachePagedGpu.*:SplitCombine*:-KvCachePagedGpu.DecodeEveryPageSize:KvCachePagedGpu.KeyHalfLayoutSplitDecode' > "$OUT/tests.log" 2>&1
echo "tests rc $?"; grep -E '^\[ +(OK|FAILED) |PASSED|FAILED  ' "$OUT/tests.log" | head -30; el tests
wait; echo "probe build: $(tail -1 "$OUT/build-probe.log")"
NEW=build-c/tests/gpu/fastattn_kvcache_bench; PROBE=/tmp/build-probe/tests/gpu/fastattn_kvcache_bench
for r in 1 2; do
  for side in new probe; do
    B=$NEW; [ $side = probe ] && B=$PROBE
    timeout 60 $B 64 in-order batches=1,4 > "$OUT/probe-$side-$r.md" 2>&1; echo "$side round $r rc $?"; grep '^| [0-9]' "$OUT/probe-$side-$r.md"
  done
done
el probe
tar czf "$OUT/callD.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callD.tgz | xargs rm -f)
