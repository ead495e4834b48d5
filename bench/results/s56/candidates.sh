#!/usr/bin/env bash
# Branch s56cand (session 55; = main 30ddccb + pagedrows + appendfast + the lengths' L1 prefetch; not yet run): on an H200, ~380 s, carry
# [".devdeps"]. Builds this tree (90a, every head dim: GPU tests + kvcache_bench) and main's (this tree with
# bench/results/s56/cand-src.patch reversed; d 128 bf16 kvcache_bench) side by side, then:
#  - kvcache_bench page 64, b1 / b4, with and without the appended token, two rounds alternating over
#    main | branch with FASTATTN_PAGED_ROWS_MAP=0 (the append change alone) | branch (+ the pool read as rows);
#  - KvCacheGpu.*, KvCacheSplitDGpu.*, KvCachePagedGpu.* on the branch; memcheck of a paged graph case.
# Read: "append" rows, main -> rows=0: the append kernel's registers (predicted -0.5 to -1.5 us a step at b1-b4,
# both caches); rows=0 -> rows=1, paged column: the map shape (predicted: the narrow rows' paged / contiguous
# 1.06-1.15 -> 1.01-1.05 if the map is the cause, else unchanged). "no-append" rows: the attention launch alone;
# there main -> rows0 is the lengths' prefetch at the forward kernel's entry (predicted -0.2 to -0.4 us a decode
# call at b1-b4, contiguous and paged alike).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
rm -rf /tmp/base && mkdir /tmp/base && cp -a src include tests cli tools cmake CMakeLists.txt scripts /tmp/base/ 2>/dev/null
(cd /tmp/base && patch -s -R -p1 < "$OLDPWD/bench/results/s56/cand-src.patch") && echo "main's tree rebuilt"
cmake -S /tmp/base -B /tmp/build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  > "$OUT/cfg-base.log" 2>&1 && ninja -C /tmp/build-base -j 5 fastattn_kvcache_bench > "$OUT/build-base.log" 2>&1 &
cmake -S . -B build-n -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-n -j 11 fastattn_gpu_tests fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; grep -i "spill\|error" "$OUT/build.log" | head; wait; tail -1 "$OUT/build-base.log"; el built
NEW=build-n/tests/gpu/fastattn_kvcache_bench; BASE=/tmp/build-base/tests/gpu/fastattn_kvcache_bench
for r in 1 2; do
  for ap in "" no-append; do
    for side in main rows0 rows1; do
      B=$NEW; rows=1; [ $side = main ] && B=$BASE; [ $side = rows0 ] && rows=0
      FASTATTN_PAGED_ROWS_MAP=$rows timeout 60 $B 64 $ap batches=1,4 > "$OUT/$side-${ap:-append}-$r.md" 2>&1
      echo "$side ${ap:-append} round $r rc $?"; grep '^| [0-9]' "$OUT/$side-${ap:-append}-$r.md"
    done
  done
done
el bench
T=build-n/tests/gpu/fastattn_gpu_tests
timeout 280 $T --gtest_filter='KvCacheGpu.*:KvCachePagedGpu.*:KvCacheSplitDGpu.*' > "$OUT/tests.log" 2>&1
echo "tests rc $?"; grep -E '^\[ +(PASSED|FAILED) |FAILED  ' "$OUT/tests.log"; grep -c '^\[       OK' "$OUT/tests.log"; el tests
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='KvCachePagedGpu.GraphCaptureAndReplay' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -1 "$OUT/memcheck.log"; el memcheck
tar czf "$OUT/cand.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v cand.tgz | xargs rm -f)
