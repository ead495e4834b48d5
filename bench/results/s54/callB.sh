#!/usr/bin/env bash
# Session 54, call B (NVIDIA H200): MHA / varlen decode (unpacked split tiles) on the narrow tile and the cluster
# merge: plan_splits keeps a one-m-block tile space's rows at tile row 0 (sched/split_plan.h).
# (1) GPU tests of the split path (Sm90FwdSplit.* incl. the new ClusterMergeUnpacked at d 64 / 128 / 256, every case
#     vs float64 and bitwise the combine kernel's), the KV-cache tests; memcheck and racecheck on NarrowTilesSmall.
# (2) bench/decode.py MHA (h 32/32): narrow + cluster merge, narrow off, and narrow off + combine kernel (the old
#     path); GQA 4 (h 32/8) b1-b2 on the shipped tree. Build: 90a, d 64 / 128 / 256, fp16 + bf16. carry: [".devdeps"]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
  "-DFASTATTN_HEAD_DIMS=64;128;256" "-DFASTATTN_DTYPES=fp16;bf16" -DFASTATTN_TESTS=ON -DFASTATTN_GPU_TESTS=ON -DFASTATTN_TOOLS=OFF \
  "-DGTest_DIR=$PWD/.devdeps/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest" > "$OUT/cfg.log" 2>&1 &&
  ninja -C build-t -j 16 fastattn fastattn_gpu_tests > "$OUT/build.log" 2>&1
echo "build rc $?"; tail -3 "$OUT/build.log" | cut -c1-300; el built
T=build-t/tests/gpu/fastattn_gpu_tests
timeout 240 $T --gtest_filter='Sm90FwdSplit.*:KvCache*' > "$OUT/gtest.log" 2>&1
echo "gtest rc $?"; grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests ran' "$OUT/gtest.log" | head -20; el gtest
grep -B2 -A12 -m3 'Failure' "$OUT/gtest.log" | head -60
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 $T --gtest_filter='Sm90FwdSplit.NarrowTilesSmall' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"; tail -2 "$OUT/memcheck.log"; el memcheck
timeout 90 compute-sanitizer --tool racecheck $T --gtest_filter='Sm90FwdSplit.NarrowTilesSmall' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc $?"; grep -c 'Race reported' "$OUT/racecheck.log"; tail -2 "$OUT/racecheck.log"; el racecheck
L=build-t/src/libfastattn.so
for mode in new narrow-off old; do
  envs=""; [ $mode != new ] && envs="FASTATTN_NARROW_TILES=0"; [ $mode = old ] && envs="$envs FASTATTN_SPLIT_MERGE=kernel"
  env $envs timeout 70 python3 bench/decode.py --lib $L --quick --heads-kv 32 --batches 1,2,8 --sk 4096,8192,32768 \
    --label "s54B MHA $mode ${FASTATTN_COMMIT:-}" --out "$OUT/mha-$mode.md" > "$OUT/mha-$mode.log" 2>&1
  echo "mha $mode rc $?"; grep '^| [128] ' "$OUT/mha-$mode.md"; el "mha $mode"
done
timeout 60 python3 bench/decode.py --lib $L --quick --batches 1,2 --sk 4096,8192 \
  --label "s54B GQA4 ${FASTATTN_COMMIT:-}" --out "$OUT/gqa.md" > "$OUT/gqa.log" 2>&1
echo "gqa rc $?"; grep '^| [12] ' "$OUT/gqa.md"; el gqa
( cd "$OUT" && tar czf all.tgz ./*.log ./*.md && rm -f ./*.log ./*.md )  # one file back (the tool returns at most 8)
