#!/usr/bin/env bash
# Session 45, call 7: the backward's zeroing of rows past the lengths: every backward GPU test (sm90 and the
# forced sm80), then #29 against FA3 (bench/ab-pairs.py).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
t0=$(date +%s)
cmake -S . -B /tmp/b7 -G Ninja "-DFASTATTN_CUDA_ARCHS=90a;80" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C /tmp/b7 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
T=/tmp/b7/tests/gpu/fastattn_gpu_tests
timeout 330 $T --gtest_filter='*Bwd*:-*Refused*' > "$OUT/tests-bwd.txt" 2>&1
echo "bwd tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-bwd.txt" | head -30
grep -B2 -A10 "Failure" "$OUT/tests-bwd.txt" | head -60
t0=$(date +%s)
timeout 70 python3 bench/ab-pairs.py --lib new=/tmp/b7/src/libfastattn.so --fa3-lib .devwt/fa3peer/libfa3peer.so \
  --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal --shape 2,8192,16,128,full --shape 4,4096,16,128,full \
  --shape 4,4096,16,256,causal --shape 2,8192,16,256,causal --shape 4,4096,16,256,full --iters 30 > "$OUT/ab-fa3.txt" 2>&1
echo "ab rc $? $(( $(date +%s) - t0 )) s"; grep -v "^#" "$OUT/ab-fa3.txt" | grep fa3
