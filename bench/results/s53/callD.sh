#!/usr/bin/env bash
# Session 53, call D (NVIDIA H200): the narrow decode tile under the sanitizers (Sm90FwdSplit.NarrowTilesSmall:
# memcheck and racecheck) and the paged KV cache against the contiguous one (tests/gpu/kvcache_bench.cpp,
# page 64, random page order; narrow tiles on, then off). Build: 90a, d 128, fp16 + bf16. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-t -j 16 fastattn_gpu_tests fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
T=build-t/tests/gpu/fastattn_gpu_tests
timeout 60 $T --gtest_filter='Sm90FwdSplit.NarrowTilesSmall' > "$OUT/small.log" 2>&1; echo "small rc $?"; grep -E '^\[ +(OK|FAILED) ' "$OUT/small.log"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='Sm90FwdSplit.NarrowTilesSmall' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -1 "$OUT/memcheck.log"; el memcheck
timeout 150 compute-sanitizer --tool racecheck $T --gtest_filter='Sm90FwdSplit.NarrowTilesSmall' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc $?"; grep -c 'Race reported' "$OUT/racecheck.log"; grep -m3 -A4 'Race reported' "$OUT/racecheck.log" | head -20; tail -2 "$OUT/racecheck.log"; el racecheck
B=build-t/tests/gpu/fastattn_kvcache_bench
timeout 90 $B 64 batches=1,4,16,64 > "$OUT/paged-narrow.md" 2>&1; echo "paged narrow rc $?"; cat "$OUT/paged-narrow.md"; el "paged narrow"
FASTATTN_NARROW_TILES=0 timeout 90 $B 64 batches=1,4 > "$OUT/paged-wide.md" 2>&1; echo "paged wide rc $?"; cat "$OUT/paged-wide.md"; el "paged wide"
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )
