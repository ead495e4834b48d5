#!/usr/bin/env bash
# Session 46 call A: main full build + *Bwd* tests; qtail reduced build (background) + its tests.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
cmake -S . -B /tmp/m -G Ninja "-DFASTATTN_CUDA_ARCHS=90a;80" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  > "$OUT/configure.log" 2>&1 && ninja -C /tmp/m fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "main build $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
( cmake -S .devwt/qtail -B /tmp/q -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;128;192;256" -DFASTATTN_TESTS=ON \
    -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/q-configure.log" 2>&1 &&
    nice ninja -C /tmp/q -j8 fastattn fastattn_gpu_tests > "$OUT/q-build.log" 2>&1; echo "qtail build rc $?" ) &
QB=$!
timeout 340 /tmp/m/tests/gpu/fastattn_gpu_tests --gtest_filter='*Bwd*:-*Refused*' > "$OUT/tests-bwd.txt" 2>&1
echo "main bwd tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/tests-bwd.txt"
grep -B2 -A10 "Failure" "$OUT/tests-bwd.txt" | head -40
wait $QB; tail -3 "$OUT/q-build.log"; t0=$(date +%s)
timeout 150 /tmp/q/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.LargeDims*:Sm90Bwd.NanPast*:Sm90Bwd.Deterministic*:Sm90BwdBitmask.*:Sm90Bwd.Varlen*' > "$OUT/q-tests.txt" 2>&1
echo "qtail tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/q-tests.txt"
grep -B2 -A10 "Failure" "$OUT/q-tests.txt" | head -30
