#!/usr/bin/env bash
# Session 55, call B (NVIDIA H200): where the paged narrow decode's extra time goes (call A: the same with the pages
# in sequence order, so the kernel's own work, not placement). A -DFASTATTN_SPLIT_STAMPS build (90a, d 128, bf16)
# of tests/gpu/kvcache_bench.cpp prints the split kernel's per-CTA phases after each timing, contiguous and paged;
# then ncu times each kernel of a few decode steps (append, attention) for both caches at b1 4k.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-s -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  -DCMAKE_CUDA_FLAGS=-DFASTATTN_SPLIT_STAMPS -DCMAKE_CXX_FLAGS=-DFASTATTN_SPLIT_STAMPS \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-s -j 16 fastattn_kvcache_bench > "$OUT/build.log" 2>&1
echo "build rc $?"; tail -3 "$OUT/build.log"; el built
B=build-s/tests/gpu/fastattn_kvcache_bench
for bb in 1 4; do
  FASTATTN_STAMP_GHZ=1.98 timeout 60 $B 64 stamps batches=$bb > "$OUT/stamps-b$bb.txt" 2>&1
  echo "stamps b$bb rc $?"; cat "$OUT/stamps-b$bb.txt"; el "stamps b$bb"
done
# b1 4k: contiguous steps first (1 checked call + 24 replays x 10 steps, 2 kernels each: 482), then paged.
for skip in 100 600; do
  timeout 120 ncu --launch-skip $skip --launch-count 12 --metrics gpu__time_duration.sum --csv $B 64 batches=1 \
    > "$OUT/ncu-skip$skip.csv" 2> "$OUT/ncu-skip$skip.err"
  echo "ncu skip $skip rc $?"; grep -E '"gpu__time_duration' "$OUT/ncu-skip$skip.csv" | awk -F'","' '{print $5" | "$NF}' | cut -c1-160; el "ncu $skip"
done
tar czf "$OUT/callB.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callB.tgz | xargs rm -f)
