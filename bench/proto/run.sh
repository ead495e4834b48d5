#!/usr/bin/env bash
# On the device machine: build and run the decode probes of bench/proto (docs/notes/inference.md, session 52) into
# $OUT (default out/): ring.md (tma_ring_probe: what a CTA streams through a TMA ring) and swapab.md
# (swapab_decode_probe: the swap-AB decode tile, checked against float64, then timed). Each probe is bounded by a
# timeout, so a hang costs at most its limit. Needs nvcc and a Hopper GPU; no carry.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas=--warn-on-spills -I src -lcuda)
for p in tma_ring_probe swapab_decode_probe; do
  nvcc "${flags[@]}" "bench/proto/$p.cu" -o "/tmp/$p" > "$OUT/$p.build.log" 2>&1 || { echo "$p: build failed"; cat "$OUT/$p.build.log"; continue; }
done
timeout 120 /tmp/tma_ring_probe > "$OUT/ring.md" 2> "$OUT/ring.err"; echo "tma_ring_probe rc $?"
timeout 180 /tmp/swapab_decode_probe > "$OUT/swapab.md" 2> "$OUT/swapab.err"; echo "swapab_decode_probe rc $?"
tail -3 "$OUT/ring.err" "$OUT/swapab.err" 2>/dev/null
grep -c '^| [0-9]' "$OUT/ring.md" "$OUT/swapab.md"; tail -1 "$OUT/swapab.md"
