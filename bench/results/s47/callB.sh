#!/usr/bin/env bash
# Session 47, call B (NVIDIA H200): the final tree (packed idle warpgroup, bandwidth / 72 GB/s split rule), d 128 bf16
# build with GPU tests: the split / cluster / KV-cache decode tests, decode --quick beside cuDNN, the split sweep.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B /tmp/f -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON \
  -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 \
  || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C /tmp/f fastattn tests/gpu/fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
el built
timeout 120 /tmp/f/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='Sm90FwdSplit.Heuristic:Sm90FwdSplit.ClusterMerge*:Sm90FwdSplit.GraphCaptureAndReplay:KvCacheGpu.DecodeWithSplits:KvCachePagedGpu.KeyHalfLayoutSplitDecode' \
  > "$OUT/tests.log" 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" "$OUT/tests.log" | head
el tests
L=/tmp/f/src/libfastattn.so
timeout 60 python3 bench/decode.py --lib $L --quick --label "s47 final" > "$OUT/decode.md" 2>&1; echo "decode rc $?"; grep "^| 1 " "$OUT/decode.md"
timeout 90 python3 bench/decode.py --lib $L --sweep --sweep-batches 1,2,4,8 --sweep-sk 4096,8192,32768 --sweep-counts 0,1,2,4,6,8,12 \
  > "$OUT/sweep.md" 2>&1; echo "sweep rc $?"; grep "^|" "$OUT/sweep.md" | tail -14
el done
