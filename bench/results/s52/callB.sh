#!/usr/bin/env bash
# Session 52, call B (NVIDIA H200): Nsight Compute (full set) of the decode calls at #30's open floor rows (b1 4k / 8k,
# b2 4k; h 32/8, d 128, bf16, the heuristic's splits), ours beside SDPA-cuDNN's: each kernel's duration against the
# graph-replayed time per call (call A), its DRAM and tensor-pipe use, for the design of the next decode tile.
# Library: this tree, d 128 bf16. carry: []
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
  -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg.log" 2>&1 && ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el "built"
cases=fastattn:1:4096:0,cudnn:1:4096:0,fastattn:1:8192:0,cudnn:1:8192:0,fastattn:2:4096:0,cudnn:2:4096:0,fastattn:1:4096:16
timeout 400 bash bench/decode-ncu.sh /tmp/ncu build-e/src/libfastattn.so $cases; echo "ncu rc $?"
cp /tmp/ncu/details.txt "$OUT/ncu-details.txt"; tail -3 /tmp/ncu/ncu.log
grep -E "^  [a-z]+_[0-9]+_[0-9]+_[0-9]+/|^    Duration|DRAM Throughput|Compute \(SM\) Throughput|Tensor is|Grid Size|Cluster Size" "$OUT/ncu-details.txt" | \
  sed -E 's/\(CUtensorMap.*//' | cut -c1-200
el "done"
