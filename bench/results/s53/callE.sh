#!/usr/bin/env bash
# Session 53, call E (NVIDIA H200): narrow tiles over contiguous caches only (call D: paged narrow took
# 1.10-1.21 x contiguous at b 1-4). The KV-cache GPU tests (paged, contiguous, split-D) and NarrowTiles,
# then tests/gpu/kvcache_bench.cpp at page 64. Build: 90a, d 128, fp16 + bf16. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-t -j 16 fastattn_gpu_tests fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
T=build-t/tests/gpu/fastattn_gpu_tests
timeout 150 $T --gtest_filter='KvCache*:Sm90FwdSplit.NarrowTiles*' > "$OUT/gtest.log" 2>&1
echo "gtest rc $?"; grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$OUT/gtest.log" | head; el gtest
timeout 90 build-t/tests/gpu/fastattn_kvcache_bench 64 batches=1,4,16 > "$OUT/paged.md" 2>&1; echo "paged rc $?"; cat "$OUT/paged.md"; el paged
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )
