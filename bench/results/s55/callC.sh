#!/usr/bin/env bash
# Session 55, call C (NVIDIA H200): paged decode with the page-table entry fetched a block ahead (cp.async into the
# ring slot's box; producer.cuh) against the tree without it (bench/results/s55/pages-ahead.patch reversed), one
# process each, alternating: tests/gpu/kvcache_bench.cpp page 64, b1 / b4. Then the KV-cache, paged, split and
# combine GPU tests on a 90a build of every head dim, and a paged test under memcheck and racecheck.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
rm -rf /tmp/base && mkdir /tmp/base && cp -a src include tests cli tools cmake CMakeLists.txt scripts /tmp/base/ 2>/dev/null
(cd /tmp/base && patch -s -R -p1 < "$OLDPWD/bench/results/s55/pages-ahead.patch") && echo "base patched back"
cmake -S /tmp/base -B /tmp/build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  > "$OUT/cfg-base.log" 2>&1 && ninja -C /tmp/build-base -j 6 fastattn_kvcache_bench > "$OUT/build-base.log" 2>&1 &
cmake -S . -B build-c -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-c -j 12 fastattn_gpu_tests fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; grep -i "spill\|error" "$OUT/build.log" | head; wait; echo "base build done"; tail -1 "$OUT/build-base.log"; el built
NEW=build-c/tests/gpu/fastattn_kvcache_bench; BASE=/tmp/build-base/tests/gpu/fastattn_kvcache_bench
for r in 1 2; do
  for side in base new; do
    B=$NEW; [ $side = base ] && B=$BASE
    timeout 60 $B 64 batches=1,4 > "$OUT/ab-$side-$r.md" 2>&1; echo "$side round $r rc $?"; grep '^| [0-9]' "$OUT/ab-$side-$r.md"
  done
done
el "a/b"
T=build-c/tests/gpu/fastattn_gpu_tests
timeout 200 $T --gtest_filter='KvCache*:KvCachePagedGpu*:Sm90FwdSplit.*:SplitCombine*' > "$OUT/tests.log" 2>&1
echo "tests rc $?"; grep -E '^\[ +(PASSED|FAILED) |tests ran|FAILED  ' "$OUT/tests.log" | head -20; el tests
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='KvCachePagedGpu.GraphCaptureAndReplay' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -1 "$OUT/memcheck.log"
timeout 120 compute-sanitizer --tool racecheck $T --gtest_filter='KvCachePagedGpu.GraphCaptureAndReplay' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc $?"; tail -2 "$OUT/racecheck.log"; el sanitizers
tar czf "$OUT/callC.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callC.tgz | xargs rm -f)
