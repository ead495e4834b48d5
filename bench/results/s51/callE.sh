#!/usr/bin/env bash
# Session 51, call E (NVIDIA H200): the split count at s_q 128 / 16 (#30's short prefill; s_q 128 b1 4k ran 1.06 x
# FA3's time in sessions 50 and 51 with both libraries at 4 splits): bench/decode.py --sweep over forced counts,
# 0 = the heuristic. Library: this tree, d 128 bf16.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
  -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg.log" 2>&1 && ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el "built"
timeout 240 python3 bench/decode.py --lib build-e/src/libfastattn.so --sweep --sq 128,16 --sweep-batches 1,8 \
  --sweep-sk 4096,32768 --sweep-counts 1,2,3,4,5,6,8,12,0 --label "s51 $(git rev-parse --short HEAD 2>/dev/null)" \
  --out "$OUT/sweep.md" > "$OUT/sweep.log" 2>&1; echo "sweep rc $?"; grep '^|' "$OUT/sweep.md"; tail -2 "$OUT/sweep.log"
el "done"
