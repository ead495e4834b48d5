#!/usr/bin/env bash
# Session 51, call B (NVIDIA H200): the input-rule changes of da71581 on the GPU: the backward of calls with no work
# (EmptyForward.Backward*: dq / dk / dv filled with 0, eager and captured; memcheck), the KV-cache suites with the
# rotary table sized by the new rule (KvCache* GPU tests), in the build gpu-check makes (90a;80, every head dim).
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON "-DFASTATTN_CUDA_ARCHS=90a;80" \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest \
  "-DFASTATTN_HEAD_DIMS=" "-DFASTATTN_DTYPES=fp16;bf16" > "$OUT/configure.log" 2>&1
cmake --build build -j 16 > "$OUT/build.log" 2>&1; echo "build rc $?"; tail -2 "$OUT/build.log"
el "built"
(cd build && timeout 300 ctest -R 'EmptyForward|KvCache' -j 4 --timeout 240 --output-on-failure > "$OUT/ctest.log" 2>&1)
echo "ctest rc $?"; grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run|Timeout' "$OUT/ctest.log" | head -20
el "tests"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 build/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='EmptyForward.Backward*' > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?"; tail -3 "$OUT/memcheck.log"
el "done"
