#!/usr/bin/env bash
# Session 46 call D (last): the candidate tree (main: qtail merged with the 80-key twin, split-D V zeroing,
# forward out rows past seqused_q) built in full, its new kernels' GPU tests, and A/Bs against .devwt/base
# (ed13f54: the forward and split-D as session 45's).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
G="-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"; cat "$OUT/gpu.txt"
git log --oneline -1 > "$OUT/commit.txt" 2>/dev/null
t0=$(date +%s)
cmake -S . -B /tmp/c -G Ninja "-DFASTATTN_CUDA_ARCHS=90a;80" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF "$G" \
  > "$OUT/configure.log" 2>&1 && ninja -C /tmp/c fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "candidate build $(( $(date +%s) - t0 )) s"
( cmake -S .devwt/base -B /tmp/b -G Ninja -DFASTATTN_CUDA_ARCHS=90a "-DFASTATTN_HEAD_DIMS=64;128;splitd" -DFASTATTN_DTYPES=bf16 \
    -DFASTATTN_TOOLS=OFF > /dev/null && nice ninja -C /tmp/b -j6 fastattn > "$OUT/base-build.log" 2>&1; echo "base build rc $?" ) &
T=/tmp/c/tests/gpu/fastattn_gpu_tests
run() {  # run NAME TIMEOUT FILTER
  local t1=$(date +%s); timeout "$2" $T --gtest_filter="$3" > "$OUT/tests-$1.txt" 2>&1
  echo "$1: rc $? $(( $(date +%s) - t1 )) s $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$OUT/tests-$1.txt" | tr '\n' ' ')"
  grep -B2 -A8 "Failure" "$OUT/tests-$1.txt" | head -30
}
run bwd 60 'Sm90Bwd.LargeDimsVarlen:Sm90Bwd.LargeDims192x128Varlen:Sm90Bwd.LargeDimsNanPast*:Sm90Bwd.NanPast*:Sm90Bwd.VarlenSeqused*:Sm90BwdBitmask.VarlenEmptySequenceAndSeqused'
run splitd 90 'KvCacheSplitDGpu.*:*Sm90FwdSplitD.*'
run fwd 150 "*Sm90Fwd.*:KvCacheGpu.NanPastTheKeys:Sm90FwdSplit.*Seqused*:Sm90FwdBias.VarlenAndSeqused:Sm90FwdAlibi.VarlenEmptySequenceAndSeqused:Sm90FwdBitmask.VarlenEmptySequenceAndSeqused:Sm90FwdBlockSparse.VarlenEmptySequenceAndSeqused:Sm80Fwd.Varlen:*Sm90FwdSplitDDecode.VarlenSplit*"
wait
L=/tmp/c/src/libfastattn.so; B=/tmp/b/src/libfastattn.so
timeout 60 python3 bench/ab-pairs.py --forward --lib base=$B --lib cand=$L --shape 2,8192,16,128,causal \
  --shape 2,8192,16,128,full --shape 4,4096,16,64,causal --iters 30 > "$OUT/ab-fwd.txt" 2>&1; grep -v "^#" "$OUT/ab-fwd.txt" | grep cand
for side in base cand; do lib=$([ $side = base ] && echo $B || echo $L)
  timeout 50 python3 bench/mla_decode.py --lib $lib --batches 1,8 --sk 4001,16384 > "$OUT/mla-$side.md" 2>&1; echo "mla $side rc $?"; grep "^|" "$OUT/mla-$side.md"
done
