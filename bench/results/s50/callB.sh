#!/usr/bin/env bash
# Session 50, call B (NVIDIA H200): NaN in the used keys gives NaN rows on every path (finish's lse from a
# NaN sum, the merges' NaN flag). Build 90a;80 every dim, the forward GPU tests (every family: finish is in
# every forward epilogue), the new NanInUsedKeys cases, a backward subset, memcheck of the new cases.
# carry: [".devdeps"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON "-DFASTATTN_CUDA_ARCHS=90a;80" -DFASTATTN_TESTS=ON \
  -DFASTATTN_GPU_TESTS=ON -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest "-DFASTATTN_HEAD_DIMS=" \
  "-DFASTATTN_DTYPES=fp16;bf16" > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C build -j 16 fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
el "built"
T=build/tests/gpu/fastattn_gpu_tests
timeout 60 $T --gtest_filter='*NanInUsedKeys*' > "$OUT/nan.log" 2>&1; echo "nan rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran|Failure" "$OUT/nan.log" | head -20
el "nan"
timeout 260 $T --gtest_filter='*Fwd*:*KvCache*:*Split*:*Empty*:Sm90Bwd.HeadDimsAndDtypes:Sm90Bwd.OddLengths:Sm90Bwd.Gqa:Sm90BwdStats.*' \
  > "$OUT/fwd.log" 2>&1; echo "fwd rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" "$OUT/fwd.log" | head -20
el "fwd"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='Sm90Fwd.NanInUsedKeys:Sm90FwdSplit.NanInUsedKeys:Sm80Fwd.NanInUsedKeys' \
  > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -4
el "done"
