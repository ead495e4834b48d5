#!/usr/bin/env bash
# Session 54, call D (NVIDIA H200): the streaming split rule's long-stream step (api/split_heuristic.cpp:
# kLongStreamBlocks: 64 tiles at >= 256 key blocks take 2 splits) beside FA3's decode (carried libfa3decode.so) and
# cuDNN: GQA 4 (h 32/8) b8 and MHA (h 32/32) b2 at 16k-64k keys, and the quick GQA set's b1 / b2 / b64 rows.
# Build: 90a, d 128, bf16, the library only. carry: [".devdeps", ".devwt/fa3dec/libfa3decode.so"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
L=build-e/src/libfastattn.so F=.devwt/fa3dec/libfa3decode.so
for c in "8 8 16384,32768,65536" "32 2 16384,32768,65536" "8 1,2,64 4096,32768"; do
  set -- $c
  timeout 90 python3 bench/decode.py --lib $L --fa3-lib $F --quick --heads-kv $1 --batches $2 --sk $3 --replays 21 \
    --label "s54D h 32/$1 ${FASTATTN_COMMIT:-}" --out "$OUT/d-$1-$2.md" > "$OUT/d-$1-$2.log" 2>&1
  echo "h 32/$1 b $2 rc $?"; grep '^| 1 ' "$OUT/d-$1-$2.md" | sort -u -t'|' -k3,3n -k4,4n; el "h 32/$1 b $2"
done
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )
