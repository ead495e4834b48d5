#!/usr/bin/env bash
# Session 56, calls F1-F4 (NVIDIA H200, one warm machine; STEP is the first argument): #29's compiler diagnostic
# again, now as the CuTe DSL's CUDA 12 build against its CUDA 13 build (call D: the cu12 DSL segfaulted in
# cuLibraryGetKernel loading the device's ptxas 13.0 cubin). F1 carry [".devwt/fa4a"], F2 [".devwt/fa4b"],
# F3 [".devwt/fa4c13a"], F4 [".devwt/fa4c13b"]: parks and installs both (bench/fa4/install.sh), then F4 times FA4's
# d 128 full backward (b4 s4k h16 bf16) in processes alternating between the two (bench/fa4/bwd_compiler_ab.py).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
case $1 in
  F1) bench/fa4/install.sh park ;;
  F2) bench/fa4/install.sh install ;;
  F3) bench/fa4/install.sh park-cu13 ;;
  F4) bench/fa4/install.sh install-cu13 && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader &&
      timeout 500 python3 bench/fa4/bwd_compiler_ab.py --site /tmp/site-fa4 --vs-site /tmp/site-fa4-cu13 \
        --dump "$OUT/fa4" --shapes 1 --rounds 2 2>&1 | tee "$OUT/ab.txt"
      tar czf "$OUT/callF4.tgz" -C "$OUT" ab.txt fa4 && rm -rf "$OUT/ab.txt" "$OUT/fa4" ;;
esac
