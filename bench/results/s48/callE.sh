#!/usr/bin/env bash
# Session 48, call E (NVIDIA H200): the wave-tail pieces in the d 256 80-key kernel (keys80.cuh) on the working tree
# (90a, every head dim, both dtypes), beside 5f17999 (base48, d 256 bf16) and FA3's d 256 backward.
# carry: [".devdeps", ".devwt/base48", ".devwt/fa3peer/libfa3peer.so"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S .devwt/base48 -B /tmp/base48 -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=256 -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/base48 -j 4 fastattn > "$OUT/build-base.log" 2>&1 ) &
cmake -S . -B /tmp/bnew -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C /tmp/bnew -j 14 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
wait
el "built"
N=/tmp/bnew/src/libfastattn.so; B=/tmp/base48/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
timeout 80 /tmp/bnew/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.WaveTailPieces:Sm90Bwd.LargeDimsKeys80:Sm90BwdStats.LargeDimsD256Keys80' \
  > "$OUT/gtest.log" 2>&1; echo "gtest rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \] " "$OUT/gtest.log" | head -12
el "tests"
timeout 60 python3 bench/ab-pairs.py --lib base=$B --lib new=$N --fa3-lib $F --shape 4,4096,16,256,full --shape 2,8192,16,256,full \
  --shape 4,4096,16,256,causal --iters 20 > "$OUT/ab-d256.txt" 2>&1; echo "ab rc $?"; grep -v "^#" "$OUT/ab-d256.txt" | grep -v "^$" | tail -12
el "done"
