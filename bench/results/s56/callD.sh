#!/usr/bin/env bash
# Session 56, call D (NVIDIA H200, warm after call C, which parked FA4's first half), carry [".devwt/fa4b"]:
# installs FA4 4.0.0b36 + the CuTe DSL 4.8.1 (bench/fa4/install.sh install), then #29's compiler diagnostic:
# FA4's d 128 full backward (b4 s4k h16, bf16) in processes alternating between the DSL's embedded PTX compiler and
# the device's ptxas (bench/fa4/bwd_compiler_ab.py; docs/notes/bwd-sm90.md, session 52), cubins kept for SASS reading.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bench/fa4/install.sh install; el install
/usr/local/cuda/bin/ptxas --version | tail -2
timeout 480 python3 bench/fa4/bwd_compiler_ab.py --site /tmp/site-fa4 --ptxas /usr/local/cuda/bin/ptxas \
  --dump "$OUT/fa4" --shapes 1 --rounds 2 2>&1 | tee "$OUT/ab.txt"
el ab
tar czf "$OUT/callD.tgz" -C "$OUT" $(cd "$OUT" && ls) && (cd "$OUT" && ls | grep -v callD.tgz | xargs rm -rf)
