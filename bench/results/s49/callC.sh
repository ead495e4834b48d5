#!/usr/bin/env bash
# Session 49, call C (NVIDIA H200): the persistent grid with the warp index kept uniform (calls A / B lost to R2URs
# in the steps): form A (.devwt/formA: the scheduler warp builds the tile, 8 lanes a share each) and form B (this
# tree: the consumers build it, one posts it), beside fd06521 (base49) and FA3's backward.
# carry: [".devdeps", ".devwt/base49", ".devwt/formA", ".devwt/fa3peer/libfa3peer.so"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S .devwt/base49 -B /tmp/base49 -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/base49 -j 4 fastattn > "$OUT/build-base.log" 2>&1 ) &
( cmake -S . -B /tmp/formB -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/formB -j 4 fastattn > "$OUT/build-formB.log" 2>&1 ) &
cmake -S .devwt/formA -B /tmp/formA -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON \
  -DFASTATTN_GPU_TESTS=ON -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C /tmp/formA -j 10 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
wait
el "built"
A=/tmp/formA/src/libfastattn.so; Bf=/tmp/formB/src/libfastattn.so; B=/tmp/base49/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
timeout 150 python3 bench/ab-pairs.py --lib base=$B --lib formA=$A --fa3-lib $F --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal \
  --shape 8,2048,16,128,causal --shape 2,8192,16,128,full --shape 4,4096,16,128,full --shape 8,2048,16,128,full \
  --shape 4,4096,16,64,causal --shape 2,8192,16,64,full --shape 4,4096,16,96,full --shape 16,1024,16,128,causal \
  --iters 30 > "$OUT/ab.txt" 2>&1; echo "ab rc $?"; grep -v "^#" "$OUT/ab.txt" | grep -v "^$" | tail -30
el "ab"
timeout 120 /tmp/formA/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.PersistentGrid' > "$OUT/gtest-persist.log" 2>&1
echo "persist rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|Which is|ctas " "$OUT/gtest-persist.log" | head -30
el "persist test"
timeout 60 python3 bench/ab-pairs.py --lib base=$B --lib formB=$Bf --shape 2,8192,16,128,causal --shape 2,8192,16,128,full \
  --shape 4,4096,16,64,causal --iters 20 > "$OUT/ab-formB.txt" 2>&1; echo "abB rc $?"; grep -v "^#" "$OUT/ab-formB.txt" | grep -v "^$" | tail -10
el "abB"
FASTATTN_MAX_CTAS=3 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 /tmp/formA/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='Sm90Bwd.VarlenSeqused:Sm90Bwd.D128SoftcapKernels' > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -3
el "done"
