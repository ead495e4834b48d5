#!/usr/bin/env bash
# Builds bench/fa3/libfa3peer.so: FlashAttention-3's Hopper forward behind a C entry point, for
# bench/run-peers.py --fa3-lib. Usage: bench/fa3/build.sh FA3_ROOT CUTLASS_INCLUDE [OUT_DIR]
#   FA3_ROOT         a checkout of github.com/Dao-AILab/flash-attention (its hopper/ is used)
#   CUTLASS_INCLUDE  CUTLASS's include/ (FA3 pins it as the csrc/cutlass submodule)
#   OUT_DIR          where the objects and the library go (default: bench/fa3/build)
# One object per line of fa3_variants.inc, compiled in parallel (one FA3 kernel each: ~100 s of one
# core with nvcc 13.0), then the dispatcher. The flags are FA3's own (hopper/setup.py) for sm_90a.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fa3=${1:?FA3_ROOT}/hopper
cutlass=${2:?CUTLASS_INCLUDE}
out=${3:-$here/build}
mkdir -p "$out"
flags=(-O3 -std=c++17 --use_fast_math -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90
       -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG --expt-relaxed-constexpr -Xcompiler -fPIC
       -gencode=arch=compute_90a,code=sm_90a -I"$fa3" -I"$cutlass" -I"$here" -w)
compile_one() {  # d dtype mask cluster
  local d=$1 t=$2 m=$3 c=$4 obj="$out/fa3_${1}_${2}_${3}_c${4}.o"
  [ -s "$obj" ] && return 0
  local causal=0 local_=0
  [ "$m" = causal ] && causal=1
  [ "$m" = local ] && local_=1
  echo "fa3: compiling d$d $t $m cluster $c"
  nvcc "${flags[@]}" -DFA3_D="$d" -DFA3_BF16=$([ "$t" = bf16 ] && echo 1 || echo 0) -DFA3_CAUSAL=$causal \
    -DFA3_LOCAL=$local_ -DFA3_CLUSTER="$c" -c "$here/fa3_peer.cu" -o "$obj.tmp" && mv "$obj.tmp" "$obj"
}
jobs=${JOBS:-$(nproc)}
sed -n 's/^FA3_DECLARE(\([0-9]*\), *\([a-z0-9]*\), *\([a-z]*\), *\([0-9]\)).*/\1 \2 \3 \4/p' \
  "$here/fa3_variants.inc" > "$out/variants.txt"
pids=()
while read -r d t m c; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  compile_one "$d" "$t" "$m" "$c" &
  pids+=($!)
done < "$out/variants.txt"
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ $fail = 0 ] || { echo "fa3: a variant failed to compile" >&2; exit 1; }
nvcc "${flags[@]}" -DFA3_DISPATCH -c "$here/fa3_peer.cu" -o "$out/fa3_dispatch.o"
nvcc -shared -gencode=arch=compute_90a,code=sm_90a "$out"/fa3_*.o -o "$out/libfa3peer.so" -lcuda
echo "fa3: built $out/libfa3peer.so"
