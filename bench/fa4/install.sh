#!/usr/bin/env bash
# On the device machine: FlashAttention-4 from bench/fa4/fetch-wheels.sh's two halves, in two calls while the
# machine stays warm (it is released ~30 s after a call):
#   call 1 (carry [".devwt/fa4a"]):  bench/fa4/install.sh park     (copies the first half to /tmp/fa4)
#   call 2 (carry [".devwt/fa4b"]):  bench/fa4/install.sh install  (joins, checks the sha256, installs)
#   for the cu13 libs (the DSL's CUDA 13 build, fetch-wheels.sh's fa4c13a / fa4c13b), after those two:
#   call 3 (carry [".devwt/fa4c13a"]): bench/fa4/install.sh park-cu13
#   call 4 (carry [".devwt/fa4c13b"]): bench/fa4/install.sh install-cu13  (the same wheels, cu13 libs: /tmp/site-fa4-cu13)
# then Python finds it with PYTHONPATH=/tmp/site-fa4 (or site.addsitedir("/tmp/site-fa4"), which also reads the
# DSL's .pth file). SRC: where the halves are (default .devwt).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${SRC:-.devwt}
# join LIBS PARKED SECOND: the libs wheel (LIBS cu12 / cu13) from its half parked in PARKED and its second half
# with the sha256 in $src/SECOND, checked, into PARKED.
join() {
  [ -f "/tmp/$2/$1.part-aa" ] || { echo "fa4: the $1 first half is not parked (run its park in the call before)"; exit 1; }
  local w
  w=$(awk '{print $2}' "$src/$3/$1.sha256")
  cat "/tmp/$2/$1.part-aa" "$src/$3/$1.part-ab" > "/tmp/$2/$w"
  (cd "/tmp/$2" && sha256sum -c "$OLDPWD/$src/$3/$1.sha256")
  rm -f "/tmp/$2/$1.part-aa"
}
pip_target() { python3 -m pip install -q --no-index --no-deps --no-compile --target "$@"; }
case ${1:-} in
  park)
    mkdir -p /tmp/fa4 && cp "$src"/fa4a/* /tmp/fa4/ && echo "fa4: first half parked ($(ls /tmp/fa4 | wc -l) files)" ;;
  install)
    join cu12 fa4 fa4b
    cp "$src"/fa4b/*.whl /tmp/fa4/
    pip_target /tmp/site-fa4 /tmp/fa4/*.whl
    echo "fa4: installed into /tmp/site-fa4" ;;
  park-cu13)
    mkdir -p /tmp/fa4c13 && cp "$src"/fa4c13a/* /tmp/fa4c13/ && echo "fa4: cu13 first half parked" ;;
  install-cu13)
    ls /tmp/fa4/flash_attn_4-*.whl >/dev/null || { echo "fa4: run 'install' first (its wheels are reused)"; exit 1; }
    join cu13 fa4c13 fa4c13b
    pip_target /tmp/site-fa4-cu13 /tmp/fa4c13/*.whl $(ls /tmp/fa4/*.whl | grep -v nvidia_cutlass_dsl_libs_cu12)
    echo "fa4: installed with the cu13 libs into /tmp/site-fa4-cu13" ;;
  *) echo "usage: bench/fa4/install.sh park|install|park-cu13|install-cu13" >&2; exit 2 ;;
esac
