#!/usr/bin/env bash
# Session 47, call A (NVIDIA H200): main c4b3810 (full 90a build with GPU tests) beside the session's start 369d0bc
# (base) and 6ffa115 (c16: clusters up to 16, no packed idle warpgroup), d 128 bf16 libraries.
# carry: [".devdeps", ".devwt/base47", ".devwt/c16"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON \
  -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C build > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
el "built main"
for side in base47 c16; do
  cmake -S .devwt/$side -B /tmp/$side -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/$side fastattn > "$OUT/build-$side.log" 2>&1 || { tail -5 "$OUT/build-$side.log"; exit 1; }
done
el "built base47, c16"
N=build/src/libfastattn.so; B=/tmp/base47/src/libfastattn.so; C=/tmp/c16/src/libfastattn.so
timeout 230 ctest --test-dir build -j 6 --output-on-failure \
  -R "Sm90Fwd|KvCache(Gpu|PagedGpu|SplitDGpu)|SplitCombine|Cases/SplitKv|Cases/KvCacheCases|EmptyForward|SplitPlan|SplitHeuristic" \
  > "$OUT/ctest.log" 2>&1; echo "ctest rc $?"; grep -E "tests passed|Failed|\*\*\*|Timeout" "$OUT/ctest.log" | head -20
build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90FwdSplit.SplitCallUsesTheWorkspace' 2>&1 | grep -E "info|OK|FAILED"
el "tests"
timeout 60 python3 bench/ab-pairs.py --forward --lib base=$B --lib new=$N --shape 2,8192,16,128,causal --shape 2,8192,16,128,full \
  --shape 4,4096,32/8,128,causal --shape 8,1024,16,128,causal --iters 30 > "$OUT/ab-fwd.txt" 2>&1; grep -v "^#" "$OUT/ab-fwd.txt" | tail -14
el "ab forward"
for side in base c16 new; do
  case $side in base) L=$B;; c16) L=$C;; new) L=$N;; esac
  timeout 60 python3 bench/decode.py --lib $L --quick --label "s47 $side" > "$OUT/decode-$side.md" 2>&1; echo "== decode $side rc $?"; grep "^| 1 " "$OUT/decode-$side.md"
done
el "decode quick"
timeout 100 python3 bench/decode.py --lib $N --sweep --sweep-batches 1,2,4,8 --sweep-sk 4096,8192,32768 --sweep-counts 0,2,3,4,6,8,12,16 \
  > "$OUT/sweep-new.md" 2>&1; echo "sweep rc $?"; grep "^|" "$OUT/sweep-new.md" | tail -14
el "sweep new"
for m in cluster kernel; do
  if [ $m = kernel ]; then export FASTATTN_SPLIT_MERGE=kernel; fi
  timeout 45 python3 bench/decode.py --lib $C --sweep --sweep-batches 1 --sweep-sk 8192,32768 --sweep-counts 8,12,16 \
    > "$OUT/sweep-c16-$m.md" 2>&1; echo "c16 $m rc $?"; grep "^| 1" "$OUT/sweep-c16-$m.md"
done
unset FASTATTN_SPLIT_MERGE
el "done"
