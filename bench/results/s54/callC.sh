#!/usr/bin/env bash
# Session 54, call C (NVIDIA H200): scripts/gpu-check's python group on the session's tree (pip install with CUDA
# 90a;80, pytest tests/python on the GPU, python -m fastattn.bench --quick), then bench/decode.py beside FA3's
# split-KV decode (libfa3decode.so, built here from FA3's source with FA3_PARTS=decode bench/fa3/build.sh, carried):
# GQA 4 (h 32/8) and MHA (h 32/32), s_q 1, on the library gpu-check installed.
# carry: [".devdeps", ".devwt/fa3dec/libfa3decode.so"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
FASTATTN_GPU_CHECK_SKIP="tests,sanitizers,runs,profile,peers" OUT="$OUT/gpucheck" scripts/gpu-check > "$OUT/gpucheck-console.log" 2>&1
echo "gpu-check rc $?"; grep -E "^- |^\| (pip|pytest|python)" "$OUT/gpucheck/summary.md"; el "gpu-check"
L=$(find /tmp/tmp.*/site -name 'libfastattn*.so*' 2>/dev/null | head -1); echo "lib $L"
F=.devwt/fa3dec/libfa3decode.so
for hkv in 8 32; do
  timeout 75 python3 bench/decode.py --lib "$L" --fa3-lib $F --quick --heads-kv $hkv --batches 1,2,8,64 --sk 4096,8192,32768 \
    --label "s54C h 32/$hkv ${FASTATTN_COMMIT:-}" --out "$OUT/decode-hkv$hkv.md" > "$OUT/decode-hkv$hkv.log" 2>&1
  echo "decode hkv $hkv rc $?"; grep '^|' "$OUT/decode-hkv$hkv.md" | head -20; el "decode $hkv"
done
( cd "$OUT" && tar czf all.tgz gpucheck gpucheck-console.log ./*.log ./*.md && rm -rf gpucheck gpucheck-console.log ./*.log ./*.md )
