#!/usr/bin/env bash
# Builds bench/fa3/libfa3peer.so: FlashAttention-3's Hopper forward (fa3_forward) and backward
# (fa3_backward) behind C entry points, for bench/run-peers.py --fa3-lib.
# Usage: [FA3_PARTS=fwd|bwd|decode|all] bench/fa3/build.sh FA3_ROOT CUTLASS_INCLUDE [OUT_DIR]
#   FA3_ROOT         a checkout of github.com/Dao-AILab/flash-attention (its hopper/ is used)
#   CUTLASS_INCLUDE  CUTLASS's include/ (FA3 pins it as the csrc/cutlass submodule)
#   OUT_DIR          where the objects and the library go (default: bench/fa3/build)
#   FA3_PARTS        fwd (default: what the forward bench and scripts/gpu-check use), bwd, or all:
#                    which entry points the library gets (the backward's 13 kernels take longer);
#                    decode: only libfa3decode.so (fa3_decode_peer.cu: FA3's split-KV decode, its
#                    unsplit packed-GQA forward and its combine, for bench/decode.py); all builds it too
#   FA3_ONLY         an extended regex over the variant lines ("fwd D DV dtype mask cluster",
#                    "bwd D dtype mask gqa det", "dec ..."): only the matching variants are built and
#                    linked (e.g. 'fwd (128|192) |bwd'); the dispatchers hold the rest as null entries,
#                    which fail as not built. variants.txt lists what the library holds.
# Objects already in OUT_DIR are kept (copy in those of an earlier build to skip them); the library
# links only those variants.txt names. One object per line of fa3_variants.inc (forward) and
# fa3_bwd_variants.inc (backward), compiled in parallel (one FA3 kernel each: ~100 s of one core
# with nvcc 13.0 for a forward, more for a backward), then the dispatchers. The flags are FA3's
# own (hopper/setup.py) for sm_90a.
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
# compile SRC OBJ D DTYPE MASK DEFINES...: one variant object (skipped when already built); DEFINES
# are the rest: -DFA3_DV and -DFA3_CLUSTER for the forward, -DFA3_GQA and -DFA3_DET for the backward.
compile() {
  local src=$1 obj=$2 d=$3 t=$4 m=$5
  shift 5
  [ -s "$obj" ] && return 0
  local defs=(-DFA3_D="$d" -DFA3_BF16=$([ "$t" = bf16 ] && echo 1 || echo 0)
              -DFA3_CAUSAL=$([ "$m" = causal ] && echo 1 || echo 0) -DFA3_LOCAL=$([ "$m" = local ] && echo 1 || echo 0) "$@")
  echo "fa3: compiling $(basename "$obj" .o)"
  nvcc "${flags[@]}" "${defs[@]}" -c "$here/$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj"
}
jobs=${JOBS:-$(nproc)}
: > "$out/variants.txt"
[ "$parts" = bwd ] || [ "$parts" = decode ] || sed -n 's/^FA3_DECLARE(\([0-9]*\), *\([0-9]*\), *\([a-z0-9]*\), *\([a-z]*\), *\([0-9]\)).*/fwd \1 \2 \3 \4 \5/p' \
  "$here/fa3_variants.inc" >> "$out/variants.txt"
[ "$parts" = fwd ] || [ "$parts" = decode ] || sed -n 's/^FA3_BWD_DECLARE(\([0-9]*\), *\([a-z0-9]*\), *\([a-z]*\), *\([0-9]\), *\([0-9]\)).*/bwd \1 \2 \3 \4 \5/p' \
  "$here/fa3_bwd_variants.inc" >> "$out/variants.txt"
if [ "$parts" = decode ] || [ "$parts" = all ]; then
  printf 'dec split0\ndec split1\ndec combine\n' >> "$out/variants.txt"
fi
if [ -n "${FA3_ONLY:-}" ]; then
  grep -E -- "$FA3_ONLY" "$out/variants.txt" > "$out/variants.tmp" || true
  mv "$out/variants.tmp" "$out/variants.txt"
fi
# obj_of KIND A B C E F: a variant line's object
obj_of() {
  case $1 in
    dec) echo "$out/fa3dec_$2.o" ;;
    fwd) echo "$out/fa3_${2}_${3}_${4}_${5}_c${6}.o" ;;
    *) echo "$out/fa3bwd_${2}_${3}_${4}_g${5}_d${6}.o" ;;
  esac
}
while read -r kind a b c e f; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  if [ "$kind" = dec ]; then
    ( obj="$out/fa3dec_$a.o"
      [ -s "$obj" ] && exit 0
      echo "fa3: compiling fa3dec_$a"
      def=$([ "$a" = combine ] && echo -DFA3_COMBINE || echo "-DFA3_SPLIT=${a#split}")
      nvcc "${flags[@]}" "$def" -c "$here/fa3_decode_peer.cu" -o "$obj.tmp" && mv "$obj.tmp" "$obj" ) &
  elif [ "$kind" = fwd ]; then
    compile fa3_peer.cu "$(obj_of "$kind" "$a" "$b" "$c" "$e" "$f")" "$a" "$c" "$e" -DFA3_DV="$b" -DFA3_CLUSTER="$f" &
  else
    compile fa3_bwd_peer.cu "$(obj_of "$kind" "$a" "$b" "$c" "$e" "$f")" "$a" "$b" "$c" -DFA3_GQA="$e" -DFA3_DET="$f" &
  fi
done < "$out/variants.txt"
# A missing object is the failure test: `wait PID` on a job that the polling above saw end can answer
# 127 ("not a child of this shell") although it compiled.
wait
fail=0
while read -r kind a b c e f; do
  obj=$(obj_of "$kind" "$a" "$b" "$c" "$e" "$f")
  [ -s "$obj" ] || { echo "fa3: $(basename "$obj" .o) failed to compile" >&2; fail=1; }
done < "$out/variants.txt"
[ $fail = 0 ] || exit 1
if { [ "$parts" = decode ] || [ "$parts" = all ]; } && grep -q '^dec' "$out/variants.txt"; then
  nvcc "${flags[@]}" -c "$here/fa3_decode_peer.cu" -o "$out/fa3dec_dispatch.o"
  nvcc -shared -gencode=arch=compute_90a,code=sm_90a "$out"/fa3dec_*.o -o "$out/libfa3decode.so" -lcuda
  echo "fa3: built $out/libfa3decode.so"
fi
[ "$parts" = decode ] && exit 0
objs=()  # the variants variants.txt lists (not every object in OUT_DIR) and the dispatchers
while read -r kind a b c e f; do
  [ "$kind" = dec ] || objs+=("$(obj_of "$kind" "$a" "$b" "$c" "$e" "$f")")
done < "$out/variants.txt"
if [ "$parts" != bwd ]; then
  nvcc "${flags[@]}" -DFA3_DISPATCH -c "$here/fa3_peer.cu" -o "$out/fa3_dispatch.o"
  objs+=("$out/fa3_dispatch.o")
fi
if [ "$parts" != fwd ]; then
  nvcc "${flags[@]}" -DFA3_DISPATCH -c "$here/fa3_bwd_peer.cu" -o "$out/fa3bwd_dispatch.o"
  objs+=("$out/fa3bwd_dispatch.o")
fi
nvcc -shared -gencode=arch=compute_90a,code=sm_90a "${objs[@]}" -o "$out/libfa3peer.so" -lcuda
echo "fa3: built $out/libfa3peer.so"
