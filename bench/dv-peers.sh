#!/usr/bin/env bash
# d_qk 192 with d_v 128 (DeepSeek's shape) beside FA3, on the GPU machine, from the repository root:
#   bench/dv-peers.sh LIBFASTATTN.so LIBFA3PEER.so
# LIBFA3PEER.so: bench/fa3/build.sh's library holding FA3's forward at 128/128, 192/192 and 192/128
# and its backward at 192 (FA3 runs 192/128's backward on its d-192 kernel), e.g. built with
#   FA3_PARTS=all FA3_ONLY='^fwd (128 128 bf16 (full|causal)|192 )|^bwd' bench/fa3/build.sh ...
# Writes into $OUT (default out/dv-peers):
#   fwd.txt  ab-pairs --forward, sides fastattn and fa3, call by call interleaved: 192/128 at
#            b2 h16 s4096 causal and full and s8192 causal, each next to d 192 and d 128 at that shape
#   bwd.txt  ab-pairs backward, the same sides: 192/128 at those three shapes, then d 192 and d 128 at
#            s4096 causal
#   gpu.txt  the card, its clocks and power limit
# Lines starting '#' are the checks (max |d| of fa3 against fastattn) and the sides that could not run
# a shape (n/a, with the error). TFLOPS: forward 2*b*h*(d + d_v)*pairs, backward 2.5 x that
# (bench/ab-pairs.py). About a minute on an H100 (two processes, 100 interleaved iterations a shape).
# The same shapes beside SDPA (cuDNN, flash, efficient), Flex and FA4 are run-peers' preset dv, in a
# call of its own (Flex compiles per case: a few minutes a mode):
#   python3 bench/run-peers.py --preset dv --lib LIB --fa3-lib FA3LIB --out $OUT/peers [--mode backward]
set -uo pipefail
lib=${1:?LIBFASTATTN.so} fa3=${2:?LIBFA3PEER.so}
for f in "$lib" "$fa3"; do [ -f "$f" ] || { echo "dv-peers: no file $f" >&2; exit 2; }; done
OUT=${OUT:-out/dv-peers}
mkdir -p "$OUT"
iters=${ITERS:-100}
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
variants=$(dirname "$fa3")/variants.txt
[ -f "$variants" ] && { echo "fa3 variants:"; cat "$variants"; } >> "$OUT/gpu.txt"

fwd=()
for shape in 4096,causal 4096,full 8192,causal; do
  for d in 192/128 192 128; do fwd+=(--shape "2,${shape%,*},16,$d,${shape#*,}"); done
done
stamp "forward"
python3 bench/ab-pairs.py --forward --lib "fastattn=$lib" --fa3-lib "$fa3" --iters "$iters" "${fwd[@]}" 2>&1 |
  tee "$OUT/fwd.txt"
stamp "backward"
python3 bench/ab-pairs.py --lib "fastattn=$lib" --fa3-lib "$fa3" --iters "$iters" \
  --shape 2,4096,16,192/128,causal --shape 2,4096,16,192/128,full --shape 2,8192,16,192/128,causal \
  --shape 2,4096,16,192,causal --shape 2,4096,16,128,causal 2>&1 | tee "$OUT/bwd.txt"
stamp "done"
