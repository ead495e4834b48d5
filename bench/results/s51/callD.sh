#!/usr/bin/env bash
# Session 51, call D (NVIDIA H200, right after call C on the warm machine): FlashAttention-4's backward (the CuTe-DSL
# wheel flash-attn-4 4.0.0b36 on nvidia-cutlass-dsl 4.8.1, cu12 libs joined from the two halves) beside ours and
# FA3's (bench/fa3 libfa3peer.so: d 128 / 256 bf16 backward) and SDPA-cuDNN, bench/run-peers.py --mode backward,
# #29's shapes. Our library: call C's build/ (gpu-check's, 90a;80 every head dim).
# carry: [".devwt/fa4b", ".devwt/fa3peer/libfa3peer.so"] (64 MiB a call: the wheels are shared between calls C and D)
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
W=nvidia_cutlass_dsl_libs_cu12-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
cat /tmp/fa4/cu12.part-aa .devwt/fa4b/cu12.part-ab > /tmp/fa4/$W && (cd /tmp/fa4 && sha256sum -c "$OLDPWD/.devwt/fa4b/cu12.sha256")
rm -f /tmp/fa4/cu12.part-aa
cp .devwt/fa4b/*.whl /tmp/fa4/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-fa4 /tmp/fa4/*.whl > "$OUT/pip.log" 2>&1
echo "pip rc $?"; tail -2 "$OUT/pip.log"
ls build/src/libfastattn.so || exit 1
ex=()
for i in 0 1; do for p in fastattn-det fa3-det sdpa-flash sdpa-efficient flex; do ex+=(--exclude "$i:$p=s51"); done; done
for i in 2 3 4 5; do for p in sdpa-flash sdpa-efficient; do ex+=(--exclude "$i:$p=s51"); done; done
timeout 420 python3 bench/run-peers.py --mode backward --preset full --filter 'dense d(128 s(4096|8192)|256 s4096)' \
  --lib build/src/libfastattn.so --fa3-lib .devwt/fa3peer/libfa3peer.so --fa4-site /tmp/site-fa4 --rounds 3 \
  --budget-s 380 "${ex[@]}" --out "$OUT/peers" > "$OUT/peers.log" 2>&1
echo "run-peers rc $?"; grep -E '^\|' "$OUT/peers/peers.md" | head -30; grep -i 'fa4\|error' "$OUT/peers.log" | head -8
el "done"
