#!/usr/bin/env bash
# Run HERE (a machine with PyPI): FlashAttention-4's Hopper / Blackwell kernels (the CuTe-DSL wheel flash-attn-4) and
# what they need beyond the device image (which has torch, cuda-bindings, protobuf), packed for the device tool's
# carry limit (64 MiB a call, the tracked files included: ~11 MB): the 92 MB cu12 libs wheel is split in two.
#   DEST/fa4a: the libs wheel's first half (cu12.part-aa), nvidia-cutlass-dsl-libs-base / -core, quack-kernels
#   DEST/fa4b: its second half (cu12.part-ab) and sha256, flash-attn-4, nvidia-cutlass-dsl, einops,
#              apache-tvm-ffi, torch-c-dlpack-ext
# Versions: those session 51 timed on the H200 (flash-attn-4 4.0.0b36 on nvidia-cutlass-dsl 4.8.1, cu12 libs;
# bench/results/2026-11-29-s51.md, call D); its quack-kernels version was not recorded: 0.6.5 here (needs the
# DSL >= 4.7), 0.6.4 ran FFPA (scripts/device-deps-ffpa, the same packing for FFPA's wheel). Usage: bench/fa4/fetch-wheels.sh [DEST, default .devwt]
# (git-ignored: add /.devwt/ to .git/info/exclude). On the device: bench/fa4/install.sh (two calls while warm).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-.devwt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 -d "$tmp" "$@"
}
# halves LIBS A B: the downloaded libs wheel (LIBS cu12 / cu13) split in two, into DEST/A and DEST/B (with its sha256).
halves() {
  local libs
  libs=$(ls "$tmp"/nvidia_cutlass_dsl_libs_"$1"-*.whl)
  rm -rf "$dest/$2" "$dest/$3"
  mkdir -p "$dest/$2" "$dest/$3"
  (cd "$tmp" && sha256sum "$(basename "$libs")") > "$dest/$3/$1.sha256"
  split -n 2 -d -a 1 "$libs" "$tmp/$1.part-"
  mv "$tmp/$1.part-0" "$dest/$2/$1.part-aa"
  mv "$tmp/$1.part-1" "$dest/$3/$1.part-ab"
  rm "$libs"
}
get flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu12==4.8.1 quack-kernels==0.6.5 einops==0.8.2 \
  apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
halves cu12 fa4a fa4b
mv "$tmp"/nvidia_cutlass_dsl_libs_base-*.whl "$tmp"/nvidia_cutlass_dsl_libs_core-*.whl "$tmp"/quack_kernels-*.whl \
  "$dest/fa4a/"
mv "$tmp"/*.whl "$dest/fa4b/"
# The same DSL's cu13 libs (its embedded compiler from CUDA 13), for the compiler A/B of bench/fa4/bwd_compiler_ab.py
# --vs-site: halves in DEST/fa4c13a, DEST/fa4c13b (install.sh park-cu13 / install-cu13).
get nvidia-cutlass-dsl-libs-cu13==4.8.1
halves cu13 fa4c13a fa4c13b
du -sh "$dest/fa4a" "$dest/fa4b" "$dest/fa4c13a" "$dest/fa4c13b"
echo "carry [\"$dest/fa4a\"] in one call, [\"$dest/fa4b\"] in the next (bench/fa4/install.sh says how)"
