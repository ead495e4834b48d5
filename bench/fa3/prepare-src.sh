#!/usr/bin/env bash
# Prepares the smallest source tree bench/fa3/build.sh needs, to carry to a machine without network
# (the device tool carries at most 64 MiB a call): FA3's hopper/ headers at flash-attention 0251105
# and the CUTLASS headers at the commit FA3 pins (7127592), only those the peer's translation units
# include (nvcc -M over a forward, a backward and a decode variant, FA3's combine and the
# dispatchers; without nvcc, all
# of hopper/*.h* and CUTLASS's include/).
# Usage: bench/fa3/prepare-src.sh FA3_GIT CUTLASS_GIT [DEST]
#   FA3_GIT, CUTLASS_GIT  git directories (bare or not) holding those commits, e.g. the mirrors
#                         the `fetch` tool makes (/work/.mirror/Dao-AILab+flash-attention/repo,
#                         /work/.mirror/NVIDIA+cutlass/repo)
#   DEST                  default /work/main/.devwt/fa3src; gets flash-attention/hopper/ and
#                         cutlass/include/, so that on the device
#                         bench/fa3/build.sh DEST/flash-attention DEST/cutlass/include OUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fa3_git=${1:?FA3_GIT}
cutlass_git=${2:?CUTLASS_GIT}
dest=${3:-/work/main/.devwt/fa3src}
FA3_COMMIT=0251105a
CUTLASS_COMMIT=7127592069c2fe01b041e174ba4345ef9b279671
full=$(mktemp -d)
trap 'rm -rf "$full"' EXIT
mkdir -p "$full/flash-attention" "$full/cutlass"
git --git-dir="$fa3_git" archive "$FA3_COMMIT" hopper | tar -x -C "$full/flash-attention"
git --git-dir="$cutlass_git" archive "$CUTLASS_COMMIT" include | tar -x -C "$full/cutlass"
rm -rf "$dest"
mkdir -p "$dest"
if command -v nvcc >/dev/null 2>&1; then
  inc=(-std=c++17 --expt-relaxed-constexpr -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90
       -gencode=arch=compute_90a,code=sm_90a -I"$full/flash-attention/hopper" -I"$full/cutlass/include" -I"$here")
  deps=$(mktemp)
  {
    nvcc -M "${inc[@]}" -DFA3_D=128 -DFA3_BF16=1 -DFA3_CAUSAL=0 -DFA3_LOCAL=0 -DFA3_CLUSTER=2 "$here/fa3_peer.cu"
    nvcc -M "${inc[@]}" -DFA3_DISPATCH "$here/fa3_peer.cu"
    nvcc -M "${inc[@]}" -DFA3_D=128 -DFA3_BF16=1 -DFA3_CAUSAL=1 -DFA3_LOCAL=0 -DFA3_GQA=1 -DFA3_DET=1 "$here/fa3_bwd_peer.cu"
    nvcc -M "${inc[@]}" -DFA3_DISPATCH "$here/fa3_bwd_peer.cu"
    nvcc -M "${inc[@]}" -DFA3_SPLIT=1 "$here/fa3_decode_peer.cu"
    nvcc -M "${inc[@]}" -DFA3_COMBINE "$here/fa3_decode_peer.cu"
    nvcc -M "${inc[@]}" "$here/fa3_decode_peer.cu"
  } | tr ' \\' '\n\n' | grep -F "$full/" | sort -u > "$deps"
  (cd "$full" && sed "s|^$full/||" "$deps" | tar -cf - -T -) | tar -x -C "$dest"
  rm -f "$deps"
else
  mkdir -p "$dest/flash-attention/hopper"
  cp "$full"/flash-attention/hopper/*.h "$full"/flash-attention/hopper/*.hpp "$dest/flash-attention/hopper/"
  cp -r "$full/cutlass" "$dest/cutlass"
fi
echo "fa3 source: $(find "$dest" -type f | wc -l) files, $(du -sh "$dest" | cut -f1) in $dest"
