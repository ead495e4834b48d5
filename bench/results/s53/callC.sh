#!/usr/bin/env bash
# Session 53, call C (NVIDIA H200): the narrow (swapped) decode tile on alternate 64-key blocks, 4-stage ring.
# (1) GPU tests of the split path (Sm90FwdSplit.* incl. NarrowTiles: every case vs float64, narrow on and
#     off), the KV-cache tests (paged: the key-half layout), the wgmma N = 8 primitives; memcheck and
#     racecheck on narrow cluster-merge cases. (2) bench/decode.py quick, narrow on and off, and the
#     split-count sweep with narrow tiles. Build: 90a, d 128, fp16 + bf16. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-t -j 16 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1
echo "build rc $?"; tail -3 "$OUT/build.log" | cut -c1-300; el built
T=build-t/tests/gpu/fastattn_gpu_tests
timeout 300 $T --gtest_filter='Sm90FwdSplit.*:KvCache*:PrimSm90.WgmmaSS*:EmptyForward.*' > "$OUT/gtest.log" 2>&1
echo "gtest rc $?"; grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran' "$OUT/gtest.log" | head -20; el gtest
grep -B2 -A12 -m3 'Failure' "$OUT/gtest.log" | head -60
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='Sm90FwdSplit.ClusterMergeDecode:Sm90FwdSplit.ClusterMergeSeqused:Sm90FwdSplit.GraphCaptureAndReplay' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -2 "$OUT/memcheck.log"; el memcheck
timeout 200 compute-sanitizer --tool racecheck $T --gtest_filter='Sm90FwdSplit.ClusterMergeSeqused' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc $?"; grep -c 'Race reported' "$OUT/racecheck.log"; grep -m5 -A3 'Race reported\|Error' "$OUT/racecheck.log" | head -20; tail -2 "$OUT/racecheck.log"; el racecheck
L=build-t/src/libfastattn.so
for mode in on off; do
  env $([ $mode = off ] && echo FASTATTN_NARROW_TILES=0) timeout 120 python3 bench/decode.py --lib $L --quick --batches 1,2,8 \
    --sk 4096,8192,32768 --label "s53C narrow $mode ${FASTATTN_COMMIT:-}" --out "$OUT/decode-$mode.md" > "$OUT/decode-$mode.log" 2>&1
  echo "decode $mode rc $?"; grep '^| [12] ' "$OUT/decode-$mode.md"; el "decode $mode"
done
timeout 120 python3 bench/decode.py --lib $L --sweep --sweep-batches 1,2 --sweep-sk 4096,8192 \
  --sweep-counts 2,4,6,8,12,16,0 --label "s53C narrow ${FASTATTN_COMMIT:-}" --out "$OUT/sweep.md" > "$OUT/sweep.log" 2>&1
echo "sweep rc $?"; grep '^|' "$OUT/sweep.md"; el sweep
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )  # one file back (the tool returns at most 8)
