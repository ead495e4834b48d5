#!/usr/bin/env bash
# Builds bench/fa3/libfa3peer.so: FlashAttention-3's Hopper forward (fa3_forward) and backward
# (fa3_backward) behind C entry points, for bench/run-peers.py --fa3-lib.
# Usage: [FA3_PARTS=fwd|bwd|decode|all] bench/fa3/build.sh FA3_ROOT CUTLASS_INCLUDE [OUT_DIR]
#   FA3_ROOT         a checkout of github.com/Dao-AILab/flash-attention (its hopper/ is used)
#   CUTLASS_INCLUDE  CUTLASS's include/ (FA3 pins it as the csrc/cutlass submodule)
#   OUT_DIR          where the objects and the library go (default: bench/fa3/build)
#   FA3_PARTS        fwd (default: what the forward bench and scripts/gpu-check use), bwd, or all:
#                    which entry points the library gets (the backward's 11 kernels take longer);
#                    decode: only libfa3decode.so (fa3_decode_peer.cu: FA3's split-KV decode, its
#                    unsplit packed-GQA forward and its combine, for bench/decode.py); all builds it too
# One object per line of fa3_variants.inc (forward) and fa3_bwd_variants.inc (backward), compiled
# in parallel (one FA3 kernel each: ~100 s of one core with nvcc 13.0 for a forward, more for a
# backward), then the dispatchers. The flags are FA3's own (hopper/setup.py) for sm_90a.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fa3=${1:?FA3_ROOT}/hopper
cutlass=${2:?CUTLASS_INCLUDE}
out=${3:-$here/build}
parts=${FA3_PARTS:-fwd}
case $parts in fwd|bwd|decode|all) ;; *) echo "fa3: FA3_PARTS must be fwd, bwd, decode or all, not '$parts'" >&2; exit 2;; esac
mkdir -p "$out"
flags=(-O3 -std=c++17 --use_fast_math -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90
       -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG --expt-relaxed-constexpr -Xcompiler -fPIC
       -gencode=arch=compute_90a,code=sm_90a -I"$fa3" -I"$cutlass" -I"$here" -w)
# compile SRC OBJ NAME-FIELDS...: one variant object (skipped when already built). The fields are
# d dtype mask [cluster] for the forward, d dtype mask gqa deterministic for the backward.
compile() {
  local src=$1 obj=$2 d=$3 t=$4 m=$5
  shift 5
  [ -s "$obj" ] && return 0
  local defs=(-DFA3_D="$d" -DFA3_BF16=$([ "$t" = bf16 ] && echo 1 || echo 0)
              -DFA3_CAUSAL=$([ "$m" = causal ] && echo 1 || echo 0) -DFA3_LOCAL=$([ "$m" = local ] && echo 1 || echo 0))
  if [ $# = 1 ]; then defs+=(-DFA3_CLUSTER="$1"); else defs+=(-DFA3_GQA="$1" -DFA3_DET="$2"); fi
  echo "fa3: compiling $(basename "$obj" .o)"
  nvcc "${flags[@]}" "${defs[@]}" -c "$here/$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj"
}
jobs=${JOBS:-$(nproc)}
: > "$out/variants.txt"
[ "$parts" = bwd ] || [ "$parts" = decode ] || sed -n 's/^FA3_DECLARE(\([0-9]*\), *\([a-z0-9]*\), *\([a-z]*\), *\([0-9]\)).*/fwd \1 \2 \3 \4/p' \
  "$here/fa3_variants.inc" >> "$out/variants.txt"
[ "$parts" = fwd ] || [ "$parts" = decode ] || sed -n 's/^FA3_BWD_DECLARE(\([0-9]*\), *\([a-z0-9]*\), *\([a-z]*\), *\([0-9]\), *\([0-9]\)).*/bwd \1 \2 \3 \4 \5/p' \
  "$here/fa3_bwd_variants.inc" >> "$out/variants.txt"
if [ "$parts" = decode ] || [ "$parts" = all ]; then
  printf 'dec split0\ndec split1\ndec combine\n' >> "$out/variants.txt"
fi
while read -r kind a b c e f; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  if [ "$kind" = dec ]; then
    ( obj="$out/fa3dec_$a.o"
      [ -s "$obj" ] && exit 0
      echo "fa3: compiling fa3dec_$a"
      def=$([ "$a" = combine ] && echo -DFA3_COMBINE || echo "-DFA3_SPLIT=${a#split}")
      nvcc "${flags[@]}" "$def" -c "$here/fa3_decode_peer.cu" -o "$obj.tmp" && mv "$obj.tmp" "$obj" ) &
  elif [ "$kind" = fwd ]; then
    compile fa3_peer.cu "$out/fa3_${a}_${b}_${c}_c${e}.o" "$a" "$b" "$c" "$e" &
  else
    compile fa3_bwd_peer.cu "$out/fa3bwd_${a}_${b}_${c}_g${e}_d${f}.o" "$a" "$b" "$c" "$e" "$f" &
  fi
done < "$out/variants.txt"
# A missing object is the failure test: `wait PID` on a job that the polling above saw end can answer
# 127 ("not a child of this shell") although it compiled.
wait
fail=0
while read -r kind a b c e f; do
  case $kind in
    dec) obj="$out/fa3dec_$a.o" ;;
    fwd) obj="$out/fa3_${a}_${b}_${c}_c${e}.o" ;;
    *) obj="$out/fa3bwd_${a}_${b}_${c}_g${e}_d${f}.o" ;;
  esac
  [ -s "$obj" ] || { echo "fa3: $(basename "$obj" .o) failed to compile" >&2; fail=1; }
done < "$out/variants.txt"
[ $fail = 0 ] || exit 1
if [ "$parts" = decode ] || [ "$parts" = all ]; then
  nvcc "${flags[@]}" -c "$here/fa3_decode_peer.cu" -o "$out/fa3dec_dispatch.o"
  nvcc -shared -gencode=arch=compute_90a,code=sm_90a "$out"/fa3dec_*.o -o "$out/libfa3decode.so" -lcuda
  echo "fa3: built $out/libfa3decode.so"
  [ "$parts" = decode ] && exit 0
fi
objs=()
if [ "$parts" != bwd ]; then
  nvcc "${flags[@]}" -DFA3_DISPATCH -c "$here/fa3_peer.cu" -o "$out/fa3_dispatch.o"
  objs+=("$out"/fa3_*.o)
fi
if [ "$parts" != fwd ]; then
  nvcc "${flags[@]}" -DFA3_DISPATCH -c "$here/fa3_bwd_peer.cu" -o "$out/fa3bwd_dispatch.o"
  objs+=("$out"/fa3bwd_*.o)
fi
nvcc -shared -gencode=arch=compute_90a,code=sm_90a "${objs[@]}" -o "$out/libfa3peer.so" -lcuda
echo "fa3: built $out/libfa3peer.so"
