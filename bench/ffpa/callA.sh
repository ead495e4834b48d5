#!/usr/bin/env bash
# FFPA as a peer on the device, call A of two (docs/notes/splitd-sm90.md, "FFPA as a peer"). Tracked as
# bench/ffpa/callA.sh; scripts/device-deps-ffpa (run here first) copies it to .devwt/ffpa/. From the
# repository root; carry [".devwt/ffpa", ".devdeps/ffpa/a"],
# timeout 90 (it ends by itself within ~60 s). Call B must follow on the same, still warm, machine.
#   1. the first halves of the wheels over 60 MB: checked, copied to /tmp/ffpa-a (/tmp outlives the call)
#   2. fastattn's reduced split-D library (90a, FASTATTN_HEAD_DIMS=splitd, bf16, no tests / tools:
#      libfastattn.so only) configured and built by a process in its own session (setsid), so it goes
#      on after this call returns; this call waits for it up to ~45 s. Call B waits for the rest.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log="$OUT/callA.txt"
{ echo "# ffpa call A $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"; nvidia-smi -L; } >"$log"
if ! (cd .devdeps/ffpa/a && sha256sum -c SHA256SUMS) >>"$log" 2>&1; then
  echo "call A: the carried halves do not match their sums (carry .devdeps/ffpa/a?)" | tee -a "$log"
  exit 1
fi
mkdir -p /tmp/ffpa-a
cp .devdeps/ffpa/a/*.part-aa /tmp/ffpa-a/
echo "- halves copied to /tmp/ffpa-a: $(ls /tmp/ffpa-a | tr '\n' ' ')" >>"$log"

B=build-ffpa  # git-ignored (/build-*/): kept on the warm machine between the calls
rm -f /tmp/ffpa-build.rc
cat >/tmp/ffpa-build.sh <<EOF
cd "$PWD"
export PATH=$PATH
if [ ! -f $B/build.ninja ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_HEAD_DIMS=splitd \
    -DFASTATTN_DTYPES=bf16 -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF || { echo 1 >/tmp/ffpa-build.rc; exit 1; }
fi
ninja -C $B -j16 fastattn
echo \$? >/tmp/ffpa-build.rc
EOF
setsid nohup bash /tmp/ffpa-build.sh >/tmp/ffpa-build.log 2>&1 </dev/null &
echo $! >/tmp/ffpa-build.pid  # call B waits on it
while [ ! -f /tmp/ffpa-build.rc ] && [ $(( $(date +%s) - t0 )) -lt 50 ]; do sleep 2; done
if [ -f /tmp/ffpa-build.rc ]; then
  echo "- build: exit $(cat /tmp/ffpa-build.rc) after $(( $(date +%s) - t0 )) s" >>"$log"
else
  echo "- build: still running after $(( $(date +%s) - t0 )) s (call B waits for it): $(tail -n 1 /tmp/ffpa-build.log)" >>"$log"
fi
tail -n 5 /tmp/ffpa-build.log | sed 's/^/    /' >>"$log"
echo "call A: $(( $(date +%s) - t0 )) s" >>"$log"
cat "$log"
