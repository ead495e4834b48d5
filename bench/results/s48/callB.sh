#!/usr/bin/env bash
# Session 48, call B (NVIDIA H200): the final wave-tail tree (no gpu-scope fence: d 64's dQ reductions stay REDG;
# d 128's 64-row kernel without softcap left without the tail) beside 5f17999 (base48) and FA3's backward; then
# FA3's split-KV decode beside ours (#30). carry: [".devdeps", ".devwt/base48", ".devwt/fa3peer/libfa3peer.so",
# ".devwt/fa3dec/libfa3decode.so"].
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
( cmake -S .devwt/base48 -B /tmp/base48 -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > /dev/null 2>&1 && ninja -C /tmp/base48 -j 6 fastattn > "$OUT/build-base.log" 2>&1 ) &
cmake -S . -B build -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;96;128" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON \
  -DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest > "$OUT/cfg.log" 2>&1 || { tail -20 "$OUT/cfg.log"; exit 1; }
ninja -C build -j 12 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { grep -m8 -E "error|FAILED" "$OUT/build.log"; exit 1; }
wait
el "built"
N=build/src/libfastattn.so; B=/tmp/base48/src/libfastattn.so; F=.devwt/fa3peer/libfa3peer.so
timeout 200 build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.WaveTailPieces:Sm90Bwd.HeadDimsAndDtypes:Sm90Bwd.OddLengths:Sm90Bwd.Long:Sm90Bwd.D64SoftcapKernels:Sm90Bwd.D128SoftcapKernels:Sm90Bwd.PairedKeyBlocks:Sm90Bwd.WindowRoutes:Sm90Bwd.Gqa:Sm90Bwd.VarlenSeqused:Sm90BwdStats.D64*:Sm90BwdStats.D96*:Sm90BwdStats.D128*' \
  > "$OUT/gtest.log" 2>&1; echo "gtest rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \] Sm90Bwd.WaveTail|tests ran" "$OUT/gtest.log" | head -20
el "tests"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 build/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Bwd.WaveTailPieces' \
  > "$OUT/memcheck.log" 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -3
el "memcheck"
timeout 150 python3 bench/ab-pairs.py --lib base=$B --lib new=$N --fa3-lib $F --shape 2,8192,16,128,full --shape 4,4096,16,128,full \
  --shape 1,8192,32,128,full --shape 2,8192,16,128,causal --shape 4,4096,16,64,full --shape 4,4096,16,64,causal \
  --shape 4,4096,16,96,full --shape 8,2048,16,128,full --iters 30 > "$OUT/ab-tail.txt" 2>&1; echo "ab rc $?"; grep -v "^#" "$OUT/ab-tail.txt" | grep -v "^$" | tail -30
el "ab"
FASTATTN_BWD_TAIL=5 timeout 60 python3 bench/ab-pairs.py --lib base=$B --lib new5=$N --shape 2,8192,16,128,full --shape 4,4096,16,128,full \
  --iters 30 > "$OUT/ab-tail5.txt" 2>&1; echo "ab5 rc $?"; grep -v "^#" "$OUT/ab-tail5.txt" | grep -v "^$" | tail -6
el "ab5"
timeout 100 python3 bench/decode.py --lib $N --fa3-lib .devwt/fa3dec/libfa3decode.so --quick --label "s48 wave tail" > "$OUT/decode-fa3.md" 2>&1
echo "decode rc $?"; grep "^|" "$OUT/decode-fa3.md" | head -30
el "done"
