#!/usr/bin/env bash
# Session 49, call D (NVIDIA H200): d 256's wave-tail pieces in a kernel of their own (the unsplit kernel back to
# 5f17999's code) and the 80-key tile's 48 MiB cap for the pieces' runs (b2 s4k h16: 3 pieces), beside fd06521
# (base49) and FA3's backward. carry: [".devdeps", ".devwt/base49", ".devwt/fa3peer/libfa3peer.so"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S .devwt/base49 -B /tmp/base49 -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=256" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/base49 -j 4 fastattn > "$OUT/build-base.log" 2>&1 ) &
cmake -S . -B build -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=192;256" "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON \
  -DFASTATTN_GPU_TESTS=ON -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C build -j 12 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
wait
el "built"
N=build/src/libfastattn.so; B=/tmp/base49/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
timeout 100 python3 bench/ab-pairs.py --lib base=$B --lib new=$N --fa3-lib $F --shape 2,4096,16,256,full --shape 2,8192,16,256,full \
  --shape 4,4096,16,256,causal --shape 4,4096,16,256,full --shape 1,8192,32,256,full --iters 30 > "$OUT/ab.txt" 2>&1
echo "ab rc $?"; grep -v "^#" "$OUT/ab.txt" | grep -v "^$" | tail -16
el "ab"
timeout 120 build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.LargeDimsKeys80:Sm90Bwd.LargeDimsDtypes:Sm90Bwd.LargeDimsGraphReplay:Sm90Bwd.LargeDimsOddLengths:Sm90BwdStats.LargeDimsD256Keys80:Sm90Bwd.WaveTailPieces' \
  > "$OUT/gtest.log" 2>&1; echo "gtest rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]" "$OUT/gtest.log" | head -12
grep -B2 -A6 "Failure" "$OUT/gtest.log" | grep -E "not built|Expected|Which is|bwd_sm90_test.cpp:300" | sort | uniq -c | head -12
el "done"
