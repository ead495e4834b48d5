#!/usr/bin/env bash
# Session 56, call A (NVIDIA H200): scripts/gpu-check's first half (build 90a;80 every head dim, ctest CPU + GPU,
# the sanitizer lists) on 4e7059a: session 55's kernel change (the page entry fetched a block ahead, 8793a06) had run
# only the targeted suites and the python group.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
FASTATTN_GPU_CHECK_SKIP="runs,profile,python,peers" OUT="$OUT/gpucheck" scripts/gpu-check > "$OUT/gpucheck-console.log" 2>&1
echo "gpu-check rc $?"; grep -E "^- |^\| " "$OUT/gpucheck/summary.md" | head -40
grep -E 'tests passed|tests failed|\*\*\*Failed|Not Run|Timeout' "$OUT/gpucheck/ctest.log" | head -30
el "gpu-check"
tar czf "$OUT/callA.tgz" -C "$OUT" gpucheck gpucheck-console.log && rm -rf "$OUT/gpucheck" "$OUT/gpucheck-console.log"
