#!/usr/bin/env bash
# Nsight Compute (--set full) of decode calls, ours beside cuDNN's (issue #30): one eager call a
# case after three warm-ups (bench/decode.py --once), every kernel inside the case's NVTX range.
#   bench/decode-ncu.sh OUT_DIR LIB CASES      CASES: peer:batch:s_k:splits,... (bench/decode.py --timeline's)
# Writes OUT_DIR/decode.ncu-rep, OUT_DIR/details.txt (ncu's details page, kernels in case order)
# and OUT_DIR/ncu.log. NCU_METRICS=m1,m2,...: those metrics instead of the full set.
set -euo pipefail
out=$1 lib=$2 cases=$3
here=$(cd "$(dirname "$0")" && pwd)
ncu=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -1)}
mkdir -p "$out"
filters=()
for c in ${cases//,/ }; do filters+=(--nvtx-include "${c//:/_}/"); done
what=(--set full)
[ -n "${NCU_METRICS:-}" ] && what=(--metrics "$NCU_METRICS")
"$ncu" --nvtx "${filters[@]}" "${what[@]}" --clock-control none -o "$out/decode" -f \
  python3 "$here/decode.py" --lib "$lib" --once "$cases" >"$out/ncu.log" 2>&1 || echo "ncu rc $?"
"$ncu" --import "$out/decode.ncu-rep" --page details --print-nvtx-rename kernel 2>&1 >"$out/details.txt" ||
  "$ncu" --import "$out/decode.ncu-rep" --page details >"$out/details.txt" 2>&1
grep -c "Context 1" "$out/details.txt" || true
