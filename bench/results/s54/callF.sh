#!/usr/bin/env bash
# Session 54, call F (NVIDIA H200): the final streaming split rule (one full wave for long streams whose count fills
# half the SMs or fewer) beside FA3's decode and cuDNN: GQA 4 (h 32/8) b1-b64 and MHA (h 32/32) b1-b2, s_q 1.
# Build: 90a, d 128, bf16, the library only. carry: [".devdeps", ".devwt/fa3dec/libfa3decode.so"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
L=build-e/src/libfastattn.so F=.devwt/fa3dec/libfa3decode.so
for c in "8 1,2,4,8,64 4096,8192,32768" "32 1,2 4096,8192,16384,32768"; do
  set -- $c
  timeout 100 python3 bench/decode.py --lib $L --fa3-lib $F --quick --heads-kv $1 --batches $2 --sk $3 --replays 15 \
    --label "s54F h 32/$1 ${FASTATTN_COMMIT:-}" --out "$OUT/f-$1.md" > "$OUT/f-$1.log" 2>&1
  echo "h 32/$1 rc $?"; grep '^| 1 ' "$OUT/f-$1.md" | sort -u -t'|' -k3,3n -k4,4n; el "h 32/$1"
done
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )
