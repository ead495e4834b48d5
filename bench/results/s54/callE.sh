#!/usr/bin/env bash
# Session 54, call E (NVIDIA H200): split-count sweeps with FA3's decode interleaved (decode.py --sweep --fa3-lib):
# the grids that round to half the SMs or fewer (GQA 4 b4: 32 tiles, 2 splits; MHA b1: 32 tiles; GQA 4 b8 at 4k-8k:
# 64 tiles, 1 split) against one more split. Build: 90a, d 128, bf16, the library only.
# carry: [".devdeps", ".devwt/fa3dec/libfa3decode.so"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
L=build-e/src/libfastattn.so F=.devwt/fa3dec/libfa3decode.so
for c in "8 4 2,3,4,0 4096,8192,16384,32768" "32 1 2,3,4,0 4096,8192,16384,32768" "8 8 1,2,0 4096,8192"; do
  set -- $c
  timeout 100 python3 bench/decode.py --lib $L --fa3-lib $F --sweep --heads-kv $1 --sweep-batches $2 --sweep-counts $3 \
    --sweep-sk $4 --replays 21 --label "s54E ${FASTATTN_COMMIT:-}" --out "$OUT/sw-$1-$2.md" > "$OUT/sw-$1-$2.log" 2>&1
  echo "h 32/$1 b $2 rc $?"; grep '^|' "$OUT/sw-$1-$2.md"; el "h 32/$1 b $2"
done
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )
