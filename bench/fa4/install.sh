#!/usr/bin/env bash
# On the device machine: FlashAttention-4 from bench/fa4/fetch-wheels.sh's two halves, in two calls while the
# machine stays warm (it is released ~30 s after a call):
#   call 1 (carry [".devwt/fa4a"]):  bench/fa4/install.sh park     (copies the first half to /tmp/fa4)
#   call 2 (carry [".devwt/fa4b"]):  bench/fa4/install.sh install  (joins, checks the sha256, installs)
# then Python finds it with PYTHONPATH=/tmp/site-fa4 (or site.addsitedir("/tmp/site-fa4"), which also reads the
# DSL's .pth file). SRC: where the halves are (default .devwt).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${SRC:-.devwt}
case ${1:-} in
  park)
    mkdir -p /tmp/fa4 && cp "$src"/fa4a/* /tmp/fa4/ && echo "fa4: first half parked ($(ls /tmp/fa4 | wc -l) files)" ;;
  install)
    [ -f /tmp/fa4/cu12.part-aa ] || { echo "fa4: the first half is not parked (run 'park' in the call before)"; exit 1; }
    w=$(awk '{print $2}' "$src/fa4b/cu12.sha256")
    cat /tmp/fa4/cu12.part-aa "$src/fa4b/cu12.part-ab" > "/tmp/fa4/$w"
    (cd /tmp/fa4 && sha256sum -c "$OLDPWD/$src/fa4b/cu12.sha256")
    rm -f /tmp/fa4/cu12.part-aa
    cp "$src"/fa4b/*.whl /tmp/fa4/
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-fa4 /tmp/fa4/*.whl
    echo "fa4: installed into /tmp/site-fa4" ;;
  *) echo "usage: bench/fa4/install.sh park|install" >&2; exit 2 ;;
esac
