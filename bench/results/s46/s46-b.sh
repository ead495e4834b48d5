#!/usr/bin/env bash
# Session 46 call B (machine warm from call A; rebuilds reduced if not): A/B qtail vs main, main vs FA3, decode.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
if [ ! -f /tmp/m/src/libfastattn.so ]; then echo "main: rebuild"; cmake -S . -B /tmp/m -G Ninja "-DFASTATTN_CUDA_ARCHS=90a" "-DFASTATTN_HEAD_DIMS=64;128;192;256" -DFASTATTN_TOOLS=OFF > /dev/null && ninja -C /tmp/m fastattn > /dev/null; fi
if [ ! -f /tmp/q/src/libfastattn.so ]; then echo "qtail: rebuild"; cmake -S .devwt/qtail -B /tmp/q -G Ninja "-DFASTATTN_CUDA_ARCHS=90a" "-DFASTATTN_HEAD_DIMS=64;128;192;256" -DFASTATTN_TOOLS=OFF > /dev/null && ninja -C /tmp/q fastattn > /dev/null; fi
timeout 80 python3 bench/ab-pairs.py --lib main=/tmp/m/src/libfastattn.so --lib qtail=/tmp/q/src/libfastattn.so \
    --shape 4,4096,16,256,causal --shape 2,8192,16,256,causal --shape 4,4096,16,256,full --shape 2,4096,16,192,causal \
    --iters 30 > "$OUT/ab-qtail.txt" 2>&1
timeout 60 python3 bench/ab-pairs.py --lib main=/tmp/m/src/libfastattn.so@det --lib qtail=/tmp/q/src/libfastattn.so@det \
    --shape 4,4096,16,64,causal --shape 4,4096,16,64,full --iters 30 > "$OUT/ab-qtail-det.txt" 2>&1
grep -v "^#" "$OUT/ab-qtail.txt" "$OUT/ab-qtail-det.txt" | tail -20
timeout 80 python3 bench/ab-pairs.py --lib main=/tmp/m/src/libfastattn.so --fa3-lib .devwt/fa3peer/libfa3peer.so \
  --shape 2,8192,16,128,causal --shape 2,8192,16,128,full --shape 4,4096,16,256,causal --shape 2,8192,16,256,causal \
  --iters 30 > "$OUT/ab-fa3.txt" 2>&1; grep -v "^#" "$OUT/ab-fa3.txt" | tail -12
timeout 90 python3 bench/decode.py --lib /tmp/m/src/libfastattn.so --quick > "$OUT/decode.md" 2>&1; grep "^|" "$OUT/decode.md"
