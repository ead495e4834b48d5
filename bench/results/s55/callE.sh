#!/usr/bin/env bash
# Session 55, call E (NVIDIA H200): scripts/gpu-check's python group (pip install with CUDA 90a;80, pytest
# tests/python on the GPU, python -m fastattn.bench --quick) on the session's tree (the page entries fetched ahead).
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
FASTATTN_GPU_CHECK_SKIP="tests,sanitizers,runs,profile,peers" OUT="$OUT/gpucheck" scripts/gpu-check > "$OUT/gpucheck-console.log" 2>&1
echo "gpu-check rc $?"; grep -E "^- |^\| (pip|pytest|python)" "$OUT/gpucheck/summary.md"
grep -E "passed|failed" "$OUT/gpucheck/logs/pytest.log" 2>/dev/null | tail -3
echo "[$(( $(date +%s) - t0 )) s] done"
tar czf "$OUT/callE.tgz" -C "$OUT" gpucheck gpucheck-console.log && rm -rf "$OUT/gpucheck" "$OUT/gpucheck-console.log"
