#!/usr/bin/env bash
# Session 53, call F (NVIDIA H200): narrow tiles where each split holds at most 2048 keys (paged or not:
# one kernel's sums for both caches). The KV-cache GPU tests (paged bitwise against contiguous) and the
# split tests that cross the rule. Build: 90a, d 128, fp16 + bf16. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-t -j 16 fastattn_gpu_tests > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
timeout 170 build-t/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='KvCachePagedGpu.*:KvCacheGpu.*:Sm90FwdSplit.NarrowTiles*:Sm90FwdSplit.LongKeys:Sm90FwdSplit.Heuristic' > "$OUT/gtest.log" 2>&1
echo "gtest rc $?"; grep -E '^\[ +(OK|FAILED) |^\[  (PASSED|FAILED) ' "$OUT/gtest.log" | awk '{print $1,$2,$3,$4,$5}' | tail -40; el gtest
