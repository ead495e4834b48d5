#!/usr/bin/env bash
# Nsight Compute of our backward preprocess (bwd_preprocess_kernel) beside FA3's (FlashAttnBwdPreprocess)
# at the same bytes, to find why ours takes ~8 % longer (issue #29; docs/notes/bwd-sm90.md, "Session 31, an
# ncu script for the preprocess gap"). One device call (H100, ncu, torch), from the root of the tree:
#   bash tools/profile/ncu_preprocess.sh
# 1. builds libfastattn.so (sm_90a, d 64 and 128, bf16) into build-ncupre/ (FASTATTN_LIB=PATH: that .so instead);
# 2. checks the kernel filters against both libraries' SASS (cuobjdump), then per shape and clock control one ncu
#    process over tools/profile/bwd_once.py (2 warm-up backward calls of ours and FA3's on the same tensors,
#    then one of each): the two preprocess launches, filtered by mangled name, --cache-control all, sections
#    SpeedOfLight, MemoryWorkloadAnalysis (+ _Chart, _Tables), LaunchStats, Occupancy, SchedulerStats,
#    WarpStateStats, SourceCounters and the table's metrics;
# 3. prints the side-by-side table (tools/profile/ncu_preprocess_table.py), also in $OUT/summary.md.
# Writes to $OUT (default out/ncupre): summary.md; d64-base.ncu-rep, d64-none.ncu-rep, d128-base.ncu-rep,
# d128-none.ncu-rep (each ours, then FA3's preprocess); logs.tar.gz (build and ncu logs, cuobjdump matches, each
# report's details page and per-SASS-instruction source counters).
# Environment: FA3_LIB (default: ../fa3peer/libfa3peer.so, else .devwt/fa3peer/libfa3peer.so), FASTATTN_LIB, NCU,
# JOBS (build jobs, default nproc), NCU_PRE_SHAPES (default "d64=4,4096,16,64,causal d128=2,8192,16,128,causal";
# NAME=b,s,h,d,MODE as bench/ab-pairs.py, h_kv = h), NCU_PRE_CLOCKS (default "base none").
# Exit status: non-zero when the build failed or a report is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$root/out/ncupre}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
cd "$root" || exit 2
logs=$(mktemp -d)/ncupre-logs
mkdir -p "$logs"
say() { printf '[ncu_preprocess %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
failed=0

fa3=${FA3_LIB:-}
for c in "$root/../fa3peer/libfa3peer.so" "$root/.devwt/fa3peer/libfa3peer.so"; do
  [[ -z $fa3 && -f $c ]] && fa3=$c
done
[[ -f $fa3 ]] || { say "no FA3 peer library (set FA3_LIB or carry .devwt/fa3peer)"; exit 2; }
ncu=${NCU:-$(command -v ncu)}
for c in /opt/nvidia/nsight-compute/*/ncu; do [[ -z $ncu && -x $c ]] && ncu=$c; done
[[ -x $ncu ]] || { say "no ncu (set NCU)"; exit 2; }
{ nvidia-smi -L; "$ncu" --version; } >"$logs/device.txt" 2>&1
cat "$logs/device.txt"

# 1. The library.
lib=${FASTATTN_LIB:-}
if [[ -z $lib ]]; then
  say "build libfastattn.so (sm_90a, d 64 / 128, bf16)"
  if cmake -S . -B build-ncupre -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a \
       "-DFASTATTN_HEAD_DIMS=64;128" -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF \
       >"$logs/build.log" 2>&1 &&
     cmake --build build-ncupre --target fastattn -j "${JOBS:-$(nproc)}" >>"$logs/build.log" 2>&1; then
    lib=$root/build-ncupre/src/libfastattn.so
  else
    tail -n 30 "$logs/build.log"
    say "build failed"
    tar -czf "$OUT/logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
    exit 1
  fi
fi
say "library: $lib; FA3: $fa3"

# Kernel filters on mangled names (--kernel-name-base mangled): every FA3 kernel is a cutlass::device_kernel
# template, told apart by its argument, here FlashAttnBwdPreprocess<tuple<C<kBlockM>, C<d>>, bfloat16_t, ...>;
# ours by BwdStatsLayout<d, ...> of bf16. Fallback when nothing matched: the demangled names.
filter_of() { echo "bwd_preprocess_kernelI13__nv_bfloat16NS0_14BwdStatsLayoutILi${1}E|FlashAttnBwdPreprocess.*ILi${1}EEEEEENS_10bfloat16_t"; }
fallback_filter='bwd_preprocess_kernel<|FlashAttnBwdPreprocess<'

# 2a. The filters against the SASS of both libraries (which instances they select).
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [[ -x $cuobjdump ]]; then
  for l in "$lib" "$fa3"; do
    timeout 120 "$cuobjdump" -sass "$l" 2>/dev/null | grep 'Function :' | sed 's/.*Function : //' | sort -u
  done >"$logs/functions.txt"
  for spec in ${NCU_PRE_SHAPES:-d64=4,4096,16,64,causal d128=2,8192,16,128,causal}; do
    d=$(cut -d, -f4 <<<"${spec#*=}")
    say "filter for d $d matches $(grep -cE "$(filter_of "$d")" "$logs/functions.txt") SASS functions:"
    grep -E "$(filter_of "$d")" "$logs/functions.txt" | sed 's/^/    /'
  done 2>&1 | tee "$logs/filters.txt"
fi

# 2b. The metrics of the table that this ncu knows (none when the query fails: the sections alone).
metrics=$(python3 tools/profile/ncu_preprocess_table.py metrics --ncu "$ncu" --log "$logs/query-metrics.log" 2>"$logs/metrics.err")
cat "$logs/metrics.err"
sections=()
known_sections=$("$ncu" --list-sections 2>&1)
for s in SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Chart MemoryWorkloadAnalysis_Tables LaunchStats \
         Occupancy SchedulerStats WarpStateStats SourceCounters; do
  if grep -qw -- "$s" <<<"$known_sections"; then sections+=(--section "$s"); else say "no section $s in this ncu"; fi
done

warmup=2
# profile NAME CLOCK FILTER_BASE FILTER SHAPE [--metrics LIST]: one ncu process, both preprocess launches.
profile() {
  local name=$1 clock=$2 base=$3 filter=$4 shape=$5
  shift 5
  timeout 300 "$ncu" --kernel-name-base "$base" --kernel-name "regex:$filter" \
    --launch-skip $((2 * warmup)) --launch-count 2 --cache-control all --clock-control "$clock" \
    "${sections[@]}" "$@" --export "$OUT/$name" --force-overwrite \
    python3 tools/profile/bwd_once.py --lib "$lib" --fa3-lib "$fa3" --shape "$shape" --side ours --side fa3 \
    --warmup "$warmup" --calls 1 >"$logs/$name.ncu.log" 2>&1
  local rc=$?
  say "$name: ncu exit $rc, $(grep -c '==PROF== Profiling' "$logs/$name.ncu.log") launch(es) profiled"
  grep -E '==(ERROR|WARNING)==' "$logs/$name.ncu.log" | head -n 5
  [[ -f $OUT/$name.ncu-rep ]] && return 0
  # No counters or no clock control: another filter or metric list would fail the same way.
  grep -E '==ERROR==' "$logs/$name.ncu.log" | grep -qiE 'NVGPUCTRPERM|permission|clock|LibraryNotLoaded' && return 2
  return 1
}

reports=()
for spec in ${NCU_PRE_SHAPES:-d64=4,4096,16,64,causal d128=2,8192,16,128,causal}; do
  shape_name=${spec%%=*} shape=${spec#*=}
  d=$(cut -d, -f4 <<<"$shape")
  for clock in ${NCU_PRE_CLOCKS:-base none}; do
    name=$shape_name-$clock
    rm -f "$OUT/$name.ncu-rep"
    say "$name: $shape, --clock-control $clock"
    profile "$name" "$clock" mangled "$(filter_of "$d")" "$shape" ${metrics:+--metrics "$metrics"}
    rc=$?
    if ((rc == 1)) && [[ -n $metrics ]]; then
      say "$name: again without the extra metrics"
      profile "$name" "$clock" mangled "$(filter_of "$d")" "$shape"
      rc=$?
    fi
    if ((rc == 1)); then
      say "$name: again with the demangled-name filter"
      profile "$name" "$clock" demangled "$fallback_filter" "$shape"
      rc=$?
    fi
    ((rc == 0)) || { say "$name: no report"; failed=1; }
    if [[ -f $OUT/$name.ncu-rep ]]; then
      "$ncu" --import "$OUT/$name.ncu-rep" --page details --print-details all >"$logs/$name.details.txt" 2>&1 ||
        "$ncu" --import "$OUT/$name.ncu-rep" --page details >"$logs/$name.details.txt" 2>&1
      "$ncu" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass >"$logs/$name.source.csv" 2>&1
    fi
    reports+=("$name ($shape, clock $clock)=$OUT/$name.ncu-rep")
  done
done

# 3. The table.
python3 tools/profile/ncu_preprocess_table.py table --ncu "$ncu" --logs "$logs" "${reports[@]}" >"$OUT/summary.md"
cat "$OUT/summary.md"
tar -czf "$OUT/logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")"
say "done: $OUT (exit $failed)"
exit "$failed"
