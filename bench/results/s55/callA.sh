#!/usr/bin/env bash
# Session 55, call A (NVIDIA H200): scripts/gpu-check's first half (build 90a;80 every head dim, ctest CPU + GPU,
# the sanitizers) on 4547cf2 (session 54's tree: the test mends and the split rule's full-wave step had not run on a
# GPU), then the paged cache against the contiguous one on that build (tests/gpu/kvcache_bench.cpp, page 64):
# pages shuffled and in sequence order, narrow tiles on and off, to split the paged narrow tile's extra time into
# placement and the kernel's own work.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
FASTATTN_GPU_CHECK_SKIP="runs,profile,python,peers" OUT="$OUT/gpucheck" scripts/gpu-check > "$OUT/gpucheck-console.log" 2>&1
echo "gpu-check rc $?"; grep -E "^- |^\| " "$OUT/gpucheck/summary.md" | head -40
grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run|Timeout' "$OUT/gpucheck/ctest.log" | head -30
el "gpu-check"
B=build/tests/gpu/fastattn_kvcache_bench
for narrow in 1 0; do
  for order in shuffled in-order; do
    arg=""; [ $order = in-order ] && arg=in-order
    FASTATTN_NARROW_TILES=$narrow timeout 60 $B 64 $arg batches=1,4 > "$OUT/paged-n$narrow-$order.md" 2>&1
    echo "paged narrow=$narrow $order rc $?"; grep '^|' "$OUT/paged-n$narrow-$order.md"; el "paged $narrow $order"
  done
done
tar czf "$OUT/callA.tgz" -C "$OUT" gpucheck gpucheck-console.log $(cd "$OUT" && ls *.md) && rm -rf "$OUT/gpucheck" "$OUT/gpucheck-console.log" "$OUT"/*.md
