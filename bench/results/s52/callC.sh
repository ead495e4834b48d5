#!/usr/bin/env bash
# Session 52, call C (NVIDIA H200): scripts/gpu-check's python group on the session's final tree (pip install with
# CUDA 90a;80, pytest tests/python on the GPU, python -m fastattn.bench --quick), then bench/call_overhead.py (per-call
# host cost against SDPA, #30's target; first run since session 51's new checks) with the package gpu-check installed.
# carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
FASTATTN_GPU_CHECK_SKIP="tests,sanitizers,runs,profile,peers" OUT="$OUT/gpucheck" scripts/gpu-check > "$OUT/gpucheck-console.log" 2>&1
echo "gpu-check rc $?"; grep -E "^- |^\| (pip|pytest|python)" "$OUT/gpucheck/summary.md"; el "gpu-check"
site=$(ls -d /tmp/tmp.*/site 2>/dev/null | tail -1)
PYTHONPATH="$site" timeout 120 python3 bench/call_overhead.py --out "$OUT/call_overhead.md" > "$OUT/call_overhead.log" 2>&1
echo "call_overhead rc $?"; grep '^|' "$OUT/call_overhead.md" | head -30
el "done"
