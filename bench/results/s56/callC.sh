#!/usr/bin/env bash
# Session 56, call C (NVIDIA H200), carry [".devdeps", ".devwt/fa4a"]: parks FA4's first wheel half for call D
# (bench/fa4/install.sh park), then the KV-cache append change merged from s56cand (registers before the lookups and
# stores) on the sm80 path, the one its call B did not run: an 80-only build (every head dim) of the GPU tests,
# KvCacheSm80.* (forced compute_80 on the H200) and memcheck of its rotary append case.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bench/fa4/install.sh park; el park
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
cmake -S . -B build-80 -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=80 \
  -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-80 -j 16 fastattn_gpu_tests > "$OUT/build.log" 2>&1
echo "build rc $?"; grep -i "spill\|error" "$OUT/build.log" | head; el built
T=build-80/tests/gpu/fastattn_gpu_tests
timeout 240 $T --gtest_filter='KvCacheSm80.*' > "$OUT/tests.log" 2>&1
echo "tests rc $?"; grep -E '^\[ +(PASSED|FAILED) |FAILED  ' "$OUT/tests.log"; grep -c '^\[       OK' "$OUT/tests.log"; el tests
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='KvCacheSm80.AppendRotaryOddLengths' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -1 "$OUT/memcheck.log"; el memcheck
tar czf "$OUT/callC.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callC.tgz | xargs rm -f)
