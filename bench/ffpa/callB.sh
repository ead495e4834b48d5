#!/usr/bin/env bash
# FFPA as a peer on the device, call B of two (after .devwt/ffpa/callA.sh on the same warm machine).
# Tracked as bench/ffpa/callB.sh; scripts/device-deps-ffpa copies it to .devwt/ffpa/.
# From the repository root; carry [".devwt/ffpa", ".devdeps/ffpa/b"], timeout 330 (it keeps to ~300 s).
#   1. the split wheels joined (/tmp/ffpa-a's halves + the carried ones), every wheel checked against the
#      sha256 taken where it was downloaded, all installed with pip --no-index --no-deps --target
#      /tmp/site-ffpa                                                              -> $OUT/import.txt
#   2. an import check through site.addsitedir (as run-peers reads it): versions, the arch the DSL sees,
#      whether torch has the DLPack C exchange API (else tvm-ffi JIT-builds its addon: done here, cached)
#   3. the build call A started: waited for, then ninja again (a no-op, or the rest of it)
#   4. bench/run-peers.py --preset splitd --ffpa-site /tmp/site-ffpa: b1 s8k h16 bf16, d 320 / 512 / 1024,
#      full and causal; fastattn, SDPA's efficient backend and FFPA (the peers with no kernel for d > 256
#      left out); 2 rounds x 10 CUDA-event timings after 3 untimed warm-ups, L2 flushed; FFPA's JIT
#      compiles happen in the untimed check        -> $OUT/bench/{peers.md,peers.json,events.jsonl}
#   summary of the steps                            -> $OUT/summary.md
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 TVM_FFI_CACHE_DIR=/tmp/tvm-ffi-cache
t_start=$(date +%s)
summary="$OUT/summary.md"
{ echo "# ffpa call B $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"; nvidia-smi -L; echo; } >"$summary"
fail() { echo "- $1" >>"$summary"; cat "$summary"; exit 1; }
el() { echo $(( $(date +%s) - t_start )); }

# 1. join, check, install
W=/tmp/ffpa-whl SITE=/tmp/site-ffpa
rm -rf $W && mkdir -p $W
cp .devdeps/ffpa/b/*.whl $W/ || fail "no wheels in .devdeps/ffpa/b (carry it; run scripts/device-deps-ffpa here)"
for part in .devdeps/ffpa/b/*.part-ab; do
  name=$(basename "$part" .part-ab)
  [ -f "/tmp/ffpa-a/$name.part-aa" ] || fail "/tmp/ffpa-a/$name.part-aa missing: call A did not run on this machine"
  cat "/tmp/ffpa-a/$name.part-aa" "$part" >"$W/$name"
done
(cd $W && sha256sum -c "$OLDPWD/.devdeps/ffpa/b/SHA256SUMS") >"$OUT/import.txt" 2>&1 ||
  fail "sha256 check failed: $(grep -v ': OK' "$OUT/import.txt" | head -3 | tr '\n' ' ')"
rm -rf $SITE
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE $W/*.whl >>"$OUT/import.txt" 2>&1 ||
  fail "pip install failed: $(tail -n 3 "$OUT/import.txt" | tr '\n' ' ')"
echo "- wheels joined, checked, installed into $SITE (t = $(el) s)" >>"$summary"

# 2. import check
timeout 150 python3 - >>"$OUT/import.txt" 2>&1 <<'EOF'
import site, time, importlib.metadata as md
t0 = time.time()
site.addsitedir("/tmp/site-ffpa")
import torch
print("torch", torch.__version__, "DLPack C exchange API:", hasattr(torch.Tensor, "__dlpack_c_exchange_api__"))
for name in ("ffpa-attn", "nvidia-cutlass-dsl", "quack-kernels", "apache-tvm-ffi", "cuda-bindings", "triton"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not found")
import ffpa_attn.cute as cute  # the backend itself (ffpa_attn's __init__ would swallow its error)
from cutlass.base_dsl import BaseDSL
print("DSL arch:", BaseDSL._get_dsl().get_arch_enum(), "| import", round(time.time() - t0, 1), "s")
print("ffpa: d 320-512 ->", cute._forward_impl_for_device(torch.device("cuda"), 512, 512).__name__,
      "| d 1024 ->", cute._forward_impl_for_device(torch.device("cuda"), 1024, 1024).__name__)
EOF
rc=$?
echo "- import check: exit $rc (t = $(el) s): $(tail -n 2 "$OUT/import.txt" | tr '\n' ' ' | cut -c1-300)" >>"$summary"

# 3. the build call A started
B=build-ffpa
building() { [ ! -f /tmp/ffpa-build.rc ] && [ -f /tmp/ffpa-build.pid ] && kill -0 "$(cat /tmp/ffpa-build.pid)" 2>/dev/null; }
while building && [ "$(el)" -lt 200 ]; do sleep 2; done
building && fail "call A's build still running at t = $(el) s: run call B again"
if [ ! -f $B/build.ninja ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=splitd \
    -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF >"$OUT/build.txt" 2>&1 || fail "configure failed"
fi
tb=$(( 215 - $(el) )); [ $tb -ge 20 ] || tb=20
timeout $tb ninja -C $B -j16 fastattn >>"$OUT/build.txt" 2>&1 ||
  fail "build did not finish (t = $(el) s; 124 = time limit: run call B again, it resumes): $(tail -n 3 "$OUT/build.txt" | tr '\n' ' ')"
echo "- build: done (t = $(el) s; call A's background log: $(tail -n 1 /tmp/ffpa-build.log 2>/dev/null))" >>"$summary"
rm -f "$OUT/build.txt"

# 4. bench
left=$(( 295 - $(el) ))
[ $left -gt 40 ] || fail "bench skipped: $left s left"
ex=()
for i in 0 1 2 3 4 5; do
  for p in sdpa-cudnn sdpa-flash cudnn-bhsd fa4; do ex+=(--exclude "$i:$p=no kernel for d > 256"); done
done
mkdir -p "$OUT/bench"
python3 bench/run-peers.py --preset splitd --lib $B/src/libfastattn.so --ffpa-site $SITE --out "$OUT/bench" \
  --rounds 2 --reps 10 --budget-s $(( left - 15 )) "${ex[@]}" >"$OUT/bench.log" 2>&1
echo "- bench: exit $? (t = $(el) s)" >>"$summary"
grep -E "^ffpa:|check ffpa|error" "$OUT/bench.log" | head -12 | sed 's/^/    /' >>"$summary"
tail -n 25 "$OUT/bench.log" | sed 's/^/    /' >>"$summary"
echo "total $(el) s" >>"$summary"
cat "$summary"
