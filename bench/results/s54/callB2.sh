#!/usr/bin/env bash
# Session 54, call B2 (NVIDIA H200): call B's benchmarks again (decode.py's --heads-kv had a SyntaxError in call B):
# bench/decode.py MHA (h 32/32): narrow + cluster merge, narrow off, and narrow off + combine kernel (the old
# path); GQA 4 (h 32/8) b1-b2 on the shipped tree. Build: 90a, d 128, bf16, the library only. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-e -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  -DFASTATTN_HEAD_DIMS=128 -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-e -j 16 fastattn > "$OUT/build.log" 2>&1
echo "build rc $?"; el built
L=build-e/src/libfastattn.so
for mode in new narrow-off old; do
  envs=""; [ $mode != new ] && envs="FASTATTN_NARROW_TILES=0"; [ $mode = old ] && envs="$envs FASTATTN_SPLIT_MERGE=kernel"
  env $envs timeout 70 python3 bench/decode.py --lib $L --quick --heads-kv 32 --batches 1,2,8 --sk 4096,8192,32768 \
    --label "s54B2 MHA $mode ${FASTATTN_COMMIT:-}" --out "$OUT/mha-$mode.md" > "$OUT/mha-$mode.log" 2>&1
  echo "mha $mode rc $?"; grep '^| [128] ' "$OUT/mha-$mode.md"; el "mha $mode"
done
timeout 60 python3 bench/decode.py --lib $L --quick --batches 1,2 --sk 4096,8192 \
  --label "s54B2 GQA4 ${FASTATTN_COMMIT:-}" --out "$OUT/gqa.md" > "$OUT/gqa.log" 2>&1
echo "gqa rc $?"; grep '^| [12] ' "$OUT/gqa.md"; el gqa
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )  # one file back (the tool returns at most 8)
