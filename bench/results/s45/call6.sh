#!/usr/bin/env bash
# Session 45, call 6: the final library (no TMA L2 promotion, bandwidth split rule): #29 against FA3's backward
# with and without FASTATTN_TMA_L2_256=1 (bench/ab-pairs.py, calls interleaved), decode --quick with cuDNN,
# the split sweep at the new promotion, and the forward's promotion A/B (CLI, alternating rounds).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
t0=$(date +%s)
cmake -S . -B /tmp/b6 -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;128;256" -DFASTATTN_DTYPES=bf16 \
  -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C /tmp/b6 fastattn cli/fastattn > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"; L=/tmp/b6/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
SH="--shape 2,8192,16,128,causal --shape 4,4096,16,128,causal --shape 2,8192,16,128,full --shape 4,4096,16,128,full --shape 4,4096,16,256,causal --shape 2,8192,16,256,causal --shape 4,4096,16,256,full"
for p in 0 1 0 1; do t0=$(date +%s)
  FASTATTN_TMA_L2_256=$p timeout 120 python3 bench/ab-pairs.py --lib new=$L --fa3-lib $F $SH --iters 30 > "$OUT/ab-l2_256-$p.txt" 2>&1
  echo "== FASTATTN_TMA_L2_256=$p ($(( $(date +%s) - t0 )) s)"; grep -v "^#" "$OUT/ab-l2_256-$p.txt" | tail -16
done
python3 bench/decode.py --lib $L --quick --label "s45 final" > "$OUT/decode.md" 2>&1; grep "^|" "$OUT/decode.md"
python3 bench/decode.py --lib $L --sweep --sweep-batches 1,2,4,8 --sweep-sk 4096,8192,32768 --sweep-counts 1,2,3,4,6,8,12,16 > "$OUT/sweep.md" 2>&1; grep "^|" "$OUT/sweep.md" | tail -13
C=/tmp/b6/cli/fastattn
for r in 1 2 3; do for p in 0 1; do for cfg in "--dim 256 --no-causal" "--dim 128 --no-causal" "--dim 128 --causal" "--dim 64 --no-causal"; do
  FASTATTN_TMA_L2_256=$p $C run --device cuda --quiet --check-rows 0 --batch 2 --seqlen 8192 --heads 16 $cfg --iters 20 2>&1 | grep "forward " | sed "s/ (min.*//; s/^/r$r l2_256=$p [$cfg] /"
done; done; done | tee "$OUT/fwd-promo.txt"
