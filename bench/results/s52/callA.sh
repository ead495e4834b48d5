#!/usr/bin/env bash
# Session 52, call A (NVIDIA H200): bench/decode.py with its peers replayed interleaved (one replay each per round,
# the order rotated per round), validated as session 51 asked: the quick table twice in two processes (per-peer
# times should agree run to run within ~2 %), then the interleaved --sweep at #30's open floor rows (b1 / b2,
# s_k 4k / 8k) over forced split counts and the heuristic (0). Library: this tree, d 128 bf16. carry: []
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
  -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg.log" 2>&1 && ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el "built"
L=build-e/src/libfastattn.so
for r in 1 2; do
  timeout 150 python3 bench/decode.py --lib $L --quick --batches 1,2,8,64 --sk 4096,8192,32768 --label "s52 ${FASTATTN_COMMIT:-}" \
    --out "$OUT/quick$r.md" > "$OUT/quick$r.log" 2>&1; echo "quick$r rc $?"; grep '^| 1 ' "$OUT/quick$r.md"; el "quick$r"
done
timeout 150 python3 bench/decode.py --lib $L --sweep --sweep-batches 1,2 --sweep-sk 4096,8192 \
  --sweep-counts 2,3,4,6,8,10,12,16,24,0 --label "s52 ${FASTATTN_COMMIT:-}" --out "$OUT/sweep.md" > "$OUT/sweep.log" 2>&1
echo "sweep rc $?"; grep '^|' "$OUT/sweep.md"; tail -2 "$OUT/sweep.log"
el "done"
