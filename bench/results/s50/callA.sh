#!/usr/bin/env bash
# Session 50, call A (NVIDIA H200), #30's benchmark items not yet run: FlashInfer's batch decode beside ours, FA3's
# and cuDNN's (s_q 1, the target's shapes), then the short prefill (s_q 4 / 16 / 128) beside FA3's split-KV decode.
# h 32/8 d 128 bf16, CUDA-graph replays (bench/decode.py). carry: [".devwt/fa3dec/libfa3decode.so", ".whl"]
# (.whl: flashinfer-python 0.5.3 and apache-tvm-ffi 0.1.15.post2, the two packages the image lacks).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1; echo "pip rc $?"
export PYTHONPATH=/tmp/site FLASHINFER_WORKSPACE_BASE=$PWD/build-fi MAX_JOBS=16 PYTHONUNBUFFERED=1
( cmake -S . -B build-dec -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg.log" 2>&1 && ninja -C build-dec -j 10 fastattn > "$OUT/build.log" 2>&1
  echo "build rc $?" ) &
# FlashInfer's two JIT modules build beside ours (its first plan compiles them)
timeout 400 python3 - > "$OUT/fi-jit.log" 2>&1 <<'PY' &
import time, torch, flashinfer
print("flashinfer", flashinfer.__version__, "torch", torch.__version__)
for tc in (False, True):
    t0 = time.time()
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
    ip = torch.tensor([0, 64], dtype=torch.int32, device="cuda")
    w.plan(ip, torch.arange(64, dtype=torch.int32, device="cuda"), torch.tensor([64], dtype=torch.int32, device="cuda"),
           32, 8, 128, 64, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    torch.cuda.synchronize()
    print("tensor_cores", tc, "built / loaded in", round(time.time() - t0, 1), "s")
PY
wait
el "built"; tail -3 "$OUT/fi-jit.log"
N=build-dec/src/libfastattn.so
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 200 python3 bench/decode.py --lib $N --fa3-lib .devwt/fa3dec/libfa3decode.so --flashinfer --sq 1 --batches 1,2,8,64 \
  --sk 4096,8192,32768 --label "s50 $(git rev-parse --short HEAD 2>/dev/null)" --out "$OUT/decode-fi.md" > "$OUT/decode-fi.log" 2>&1
echo "decode-fi rc $?"; grep "^|" "$OUT/decode-fi.md" | head -30; grep -i "flashinfer" "$OUT/decode-fi.log" | head -8
el "fi"
timeout 180 python3 bench/decode.py --lib $N --fa3-lib .devwt/fa3dec/libfa3decode.so --sq 4,16,128 --batches 1,8 \
  --sk 4096,32768 --label "s50 $(git rev-parse --short HEAD 2>/dev/null)" --out "$OUT/decode-sq.md" > "$OUT/decode-sq.log" 2>&1
echo "decode-sq rc $?"; grep "^|" "$OUT/decode-sq.md" | head -30; tail -3 "$OUT/decode-sq.log"
el "done"
