#!/usr/bin/env bash
# Session 52, call D (NVIDIA H200): the final tree's Python on the GPU after the per-call trims (flash_attn_func's
# eager inference call straight to the extension, FA-keyword check's fast path): pip install (CUDA 90a;80), pytest
# tests/python, bench/call_overhead.py (fastattn against SDPA in one run: call C read 29.5 against 26.7 us) and
# bench/call_breakdown.py (each layer of the call alone). carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
site=/tmp/site-d; mkdir -p $site
python3 -m pip install -q --no-index --no-deps --target $site .devdeps/wheels/*.whl > "$OUT/pip-tools.log" 2>&1
export PYTHONPATH=$site
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install -q --no-build-isolation --no-deps --target $site \
  -C "cmake.define.FASTATTN_CUDA_ARCHS=90a;80" . > "$OUT/pip-install.log" 2>&1; echo "pip rc $?"; el "installed"
timeout 150 python3 bench/call_overhead.py --out "$OUT/call_overhead.md" > "$OUT/call_overhead.log" 2>&1
echo "call_overhead rc $?"; grep -E '^\| (sdpa|fastattn|_C.forward_views|views x5|decode|hf) ' "$OUT/call_overhead.md"
timeout 100 python3 bench/call_breakdown.py > "$OUT/call_breakdown.md" 2>&1; echo "breakdown rc $?"; cat "$OUT/call_breakdown.md"
el "timed"
timeout 280 python3 -X faulthandler -m pytest tests/python -q -p no:cacheprovider > "$OUT/pytest.log" 2>&1
echo "pytest rc $?"; tail -3 "$OUT/pytest.log"
el "done"
