#!/usr/bin/env bash
# Session 46 call C: qtail (hand-over only with seqused_q) 90a full build, Sm90Bwd* tests, A/B vs main.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
t0=$(date +%s)
cmake -S .devwt/qtail -B /tmp/q -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  > "$OUT/q-configure.log" 2>&1 && ninja -C /tmp/q fastattn fastattn_gpu_tests > "$OUT/q-build.log" 2>&1 || { tail -30 "$OUT/q-build.log"; exit 1; }
echo "qtail build $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
( cmake -S . -B /tmp/m -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;192;256" -DFASTATTN_TOOLS=OFF > /dev/null && nice ninja -C /tmp/m -j6 fastattn > "$OUT/m-build.log" 2>&1; echo "main build rc $?" ) &
timeout 330 /tmp/q/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd*:-*Refused*:Sm90BwdBlockSparse.AllOnesMask' > "$OUT/q-tests.txt" 2>&1
echo "qtail tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "^\[  PASSED|^\[  FAILED|tests ran" "$OUT/q-tests.txt"
grep -B2 -A10 "Failure" "$OUT/q-tests.txt" | head -40
wait
timeout 80 python3 bench/ab-pairs.py --lib main=/tmp/m/src/libfastattn.so --lib qtail=/tmp/q/src/libfastattn.so \
    --shape 4,4096,16,256,causal --shape 2,8192,16,256,causal --shape 4,4096,16,256,full --shape 2,4096,16,192,causal \
    --iters 30 > "$OUT/ab-qtail.txt" 2>&1
timeout 60 python3 bench/ab-pairs.py --lib main=/tmp/m/src/libfastattn.so@det --lib qtail=/tmp/q/src/libfastattn.so@det \
    --shape 4,4096,16,64,causal --shape 4,4096,16,64,full --iters 30 > "$OUT/ab-qtail-det.txt" 2>&1
grep -v "^#" "$OUT/ab-qtail.txt" "$OUT/ab-qtail-det.txt" | grep qtail
