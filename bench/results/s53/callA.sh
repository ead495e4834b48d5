#!/usr/bin/env bash
# Session 53, call A (NVIDIA H200): (1) bench/proto/run.sh: the TMA-ring ceiling and the swap-AB decode tile
# (checked against float64 before timing); (2) bench/decode.py warm (graph replays, L2 hot) and cold
# (--between-mib 128: a memset evicting the L2 before every call, its own time subtracted), peers interleaved.
# Library: this tree, d 128 bf16. carry: []
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S . -B build-e -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
  -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg.log" 2>&1 && ninja -C build-e -j 12 fastattn > "$OUT/build.log" 2>&1; echo "build rc $?" > "$OUT/build.rc" ) &
bpid=$!
mkdir -p "$OUT/proto"; OUT="$OUT/proto" bash bench/proto/run.sh; el "probes"
wait $bpid; cat "$OUT/build.rc"; el "built"
L=build-e/src/libfastattn.so
timeout 150 python3 bench/decode.py --lib $L --quick --batches 1,2,8 --sk 4096,8192,32768 --label "s53 warm ${FASTATTN_COMMIT:-}" \
  --out "$OUT/warm.md" > "$OUT/warm.log" 2>&1; echo "warm rc $?"; grep '^| [12] ' "$OUT/warm.md"; el "warm"
timeout 200 python3 bench/decode.py --lib $L --quick --batches 1,2,8 --sk 4096,8192,32768 --between-mib 128 \
  --label "s53 cold ${FASTATTN_COMMIT:-}" --out "$OUT/cold.md" > "$OUT/cold.log" 2>&1; echo "cold rc $?"; grep '^| [12] ' "$OUT/cold.md"; tail -2 "$OUT/cold.log"; el "cold"
