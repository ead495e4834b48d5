#!/usr/bin/env bash
# Session 51, call C (NVIDIA H200): gpu-check's python group on this session's tree (build 90a;80 every head dim,
# pip install ., pytest tests/python on the GPU, python -m fastattn.bench --quick), then call B's two failures
# rebuilt and rerun (EmptyForward.*, KvCachePagedGpu.CacheRowStridesAtBatchOne), then the first half of the CuTe
# DSL's cu12 libs wheel parked in /tmp for call D (FA4's backward beside ours).
# carry: [".devdeps", ".devwt/fa4a"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
mkdir -p /tmp/fa4 && cp .devwt/fa4a/* /tmp/fa4/ && echo "fa4 part A parked: $(ls /tmp/fa4 | wc -l) files"
FASTATTN_GPU_CHECK_SKIP="tests,sanitizers,runs,profile,peers" OUT="$OUT/gc" timeout 500 scripts/gpu-check > "$OUT/gc.log" 2>&1
echo "gpu-check rc $?"; grep -E '^\| ' "$OUT/gc/summary.md" | head -24; grep -E 'passed|failed' "$OUT/gc.log" | tail -3
el "gpu-check"
timeout 60 build/tests/gpu/fastattn_gpu_tests --gtest_filter='EmptyForward.*:KvCachePagedGpu.CacheRowStridesAtBatchOne' \
  > "$OUT/gtests.log" 2>&1; echo "gtests rc $?"; grep -E '^\[  (PASSED|FAILED) |FAILED  \]' "$OUT/gtests.log" | head
el "done"
