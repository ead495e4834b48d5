#!/usr/bin/env bash
# Session 49, call A (NVIDIA H200): the backward's persistent grid (sm90/bwd/persist.cuh) beside fd06521 (base49)
# and FA3's backward. carry: [".devdeps", ".devwt/base49", ".devwt/fa3peer/libfa3peer.so"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S .devwt/base49 -B /tmp/base49 -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/base49 -j 6 fastattn > "$OUT/build-base.log" 2>&1 ) &
cmake -S . -B build -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON \
  -DFASTATTN_GPU_TESTS=ON -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C build -j 12 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
wait
el "built"
N=build/src/libfastattn.so; B=/tmp/base49/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
timeout 150 build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.PersistentGrid' > "$OUT/gtest-persist.log" 2>&1
echo "persist rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|Expected|Which is|ctas " "$OUT/gtest-persist.log" | head -30
el "persist test"
timeout 150 python3 bench/ab-pairs.py --lib base=$B --lib new=$N --fa3-lib $F --shape 2,8192,16,128,causal --shape 4,4096,16,128,causal \
  --shape 8,2048,16,128,causal --shape 2,8192,16,128,full --shape 4,4096,16,128,full --shape 8,2048,16,128,full \
  --shape 4,4096,16,64,causal --shape 2,8192,16,64,full --shape 4,4096,16,96,full --shape 4,4096,64/8,128,causal \
  --iters 30 > "$OUT/ab.txt" 2>&1; echo "ab rc $?"; grep -v "^#" "$OUT/ab.txt" | grep -v "^$" | tail -30
el "ab"
timeout 120 build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.WaveTailPieces:Sm90Bwd.HeadDimsAndDtypes:Sm90Bwd.OddLengths:Sm90Bwd.Long:Sm90Bwd.D64SoftcapKernels:Sm90Bwd.D128SoftcapKernels:Sm90Bwd.PairedKeyBlocks:Sm90Bwd.WindowRoutes:Sm90Bwd.Gqa:Sm90Bwd.VarlenSeqused:Sm90BwdStats.D64*:Sm90BwdStats.D96*:Sm90BwdStats.D128*' \
  > "$OUT/gtest.log" 2>&1; echo "gtest rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" "$OUT/gtest.log" | head -20
el "tests"
FASTATTN_MAX_CTAS=3 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 build/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='Sm90Bwd.VarlenSeqused:Sm90Bwd.D128SoftcapKernels' > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -3
el "memcheck"
FASTATTN_MAX_CTAS=3 timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard build/tests/gpu/fastattn_gpu_tests \
  --gtest_filter='Sm90Bwd.VarlenSeqused' > "$OUT/racecheck.log" 2>&1; echo "racecheck rc $?"
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | head -3; grep -E "^(Error|Warning|=========)" "$OUT/racecheck.log" | grep -v "cp_async_bulk\|lds_f32" | sort | uniq -c | sort -rn | head -12
el "done"
