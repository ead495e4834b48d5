#!/usr/bin/env bash
# The backward's per-CTA stamps on the device (issue #29's window target; docs/notes/bwd-sm90.md,
# session 32): builds the bf16 d 128 library from this tree with -DFASTATTN_BWD_STAMPS=ON and
# without, runs fastattn_bwd_stamps (window (64, 0) and causal, b2 h16 s8192 d128), and times the
# whole backward with both builds' `fastattn run`, interleaved, to show what the stamps themselves cost.
# Run from the repository root; results under $OUT (default /tmp/bwd-stamps):
#   summary.md         the bench's tables (phases, steps, writer jobs, tail, per SM)
#   perturbation.txt   `fastattn run --backward` medians per build, 3 rounds a shape, interleaved
#   gpu.txt, build.log, raw.tgz (every CTA's words as CSV, for a later reading)
# No GTest, no network. ~100-150 s: builds at -j16, the bench, the timings.
set -euo pipefail
OUT=${OUT:-/tmp/bwd-stamps}
mkdir -p "$OUT"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
common=("${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=128
        -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF)
t0=$(date +%s)
build() {  # build DIR STAMPS TARGET...
  local dir=$1 stamps=$2
  shift 2
  cmake -S . -B "$dir" "${common[@]}" -DFASTATTN_BWD_STAMPS="$stamps"
  cmake --build "$dir" -j 16 --target "$@"
}
sides=(nostamps stamps)
{
  build build-stamps ON fastattn_bwd_stamps fastattn_cli
  build build-nostamps OFF fastattn_cli
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "builds: $(($(date +%s) - t0)) s" | tee -a "$OUT/build.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv >"$OUT/gpu.txt" 2>&1 || true

build-stamps/fastattn_bwd_stamps window causal iters=20 raw="$OUT/raw-" | tee "$OUT/summary.md"

shape=(--device cuda --quiet --check-rows 0 --backward --dtype bf16 --batch 2 --seqlen 8192 --heads 16 --kv-heads 16
       --dim 128 --iters 20 --warmup 3)
{
  echo "fastattn run --backward medians (ms) per build, interleaved (nostamps = main's kernels)"
  for mask in "--window 64,0" "--causal"; do
    for r in 1 2 3; do
      for side in "${sides[@]}"; do
        json=$(mktemp)
        # shellcheck disable=SC2086  # the mask's flags split
        "build-$side/cli/fastattn" run "${shape[@]}" $mask --json "$json" >/dev/null 2>&1 &&
          printf '%-14s round %d %-15s %s\n' "$mask" "$r" "$side" \
            "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["backward"]["ms"])' "$json")"
        rm -f "$json"
      done
    done
  done
} | tee "$OUT/perturbation.txt"
(cd "$OUT" && tar czf raw.tgz raw-*.csv && rm -f raw-*.csv)
echo "total: $(($(date +%s) - t0)) s"
