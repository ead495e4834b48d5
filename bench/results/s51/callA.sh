#!/usr/bin/env bash
# Session 51, call A (NVIDIA H200): (1) branch narrow64 (d 64 narrow windows on FwdConfig<64, 64, 4>) tested and
# A/B'd against main in one process (bench/ab-pairs.py --forward); (2) #30's short prefill (s_q 4 / 16 / 128)
# beside FlashInfer's paged prefill (fa2 backend) and FA3's split-KV path, never run before.
# carry: [".devdeps", ".devwt/n64src", ".whl", ".devwt/fa3dec/libfa3decode.so"]; .devwt/n64src = `git archive narrow64`.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
GT=-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1; echo "pip rc $?"
export PYTHONPATH=/tmp/site FLASHINFER_WORKSPACE_BASE=$PWD/build-fi MAX_JOBS=8 PYTHONUNBUFFERED=1
( cmake -S . -B build-main -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;128" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF -DFASTATTN_TESTS=OFF > "$OUT/cfg-main.log" 2>&1 && ninja -C build-main -j 6 fastattn > "$OUT/build-main.log" 2>&1
  echo "build main rc $?" ) &
( cmake -S .devwt/n64src -B build-n64 -G Ninja -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=64 "-DFASTATTN_DTYPES=fp16;bf16" \
    -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON $GT > "$OUT/cfg-n64.log" 2>&1 &&
  ninja -C build-n64 -j 6 fastattn fastattn_gpu_tests > "$OUT/build-n64.log" 2>&1; echo "build n64 rc $?" ) &
# FlashInfer's prefill module (fa2 backend) builds beside ours: its first plan compiles it
timeout 300 python3 - > "$OUT/fi-jit.log" 2>&1 <<'PY' &
import time, torch, flashinfer
print("flashinfer", flashinfer.__version__, "torch", torch.__version__)
t0 = time.time()
ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa2")
d = torch.device("cuda"); i32 = torch.int32
w.plan(torch.tensor([0, 4], dtype=i32, device=d), torch.tensor([0, 1], dtype=i32, device=d), torch.zeros(1, dtype=i32, device=d),
       torch.tensor([64], dtype=i32, device=d), 32, 8, 128, 64, causal=False, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
torch.cuda.synchronize(); print("prefill fa2 built / loaded in", round(time.time() - t0, 1), "s")
PY
wait
el "built"; tail -2 "$OUT/fi-jit.log"; tail -3 "$OUT/build-n64.log" | cut -c1-300
NB=build-n64/src/libfastattn.so; MB=build-main/src/libfastattn.so
timeout 150 build-n64/tests/gpu/fastattn_gpu_tests --gtest_filter='Sm90Fwd.LocalWindows:Sm90Fwd.ThreeConsumerWarpgroupsD64' \
  > "$OUT/n64-tests.log" 2>&1; echo "n64 tests rc $?"; grep -E '^\[  (PASSED|FAILED) |^\[ +OK|FAILED' "$OUT/n64-tests.log" | head -12
el "tests"
timeout 150 python3 bench/ab-pairs.py --forward --lib main=$MB --lib narrow=$NB --shape 2,8192,16,64,w64:0 \
  --shape 2,8192,16,64,w17:33 --shape 2,8192,16,64,w32:32 --shape 2,8192,16,64,causal --shape 2,8192,16,64,w256:0 \
  --iters 30 > "$OUT/ab-n64.log" 2>&1; echo "ab rc $?"; cat "$OUT/ab-n64.log" | tail -25
el "ab"
timeout 200 python3 bench/decode.py --lib $MB --fa3-lib .devwt/fa3dec/libfa3decode.so --flashinfer --sq 4,16,128 --batches 1,8 \
  --sk 4096,32768 --label "s51 main" --out "$OUT/decode-sq-fi.md" > "$OUT/decode-sq-fi.log" 2>&1
echo "decode-sq-fi rc $?"; grep "^|" "$OUT/decode-sq-fi.md" | head -30; grep -i "flashinfer" "$OUT/decode-sq-fi.log" | head -8
el "done"
