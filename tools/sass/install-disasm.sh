#!/usr/bin/env bash
# Installs cuobjdump and nvdisasm for the SASS auditor. Our machines carry nvcc without the
# binary utilities; NVIDIA publishes both as PyPI wheels (binaries under nvidia/cu13/bin).
# Idempotent: does nothing when the pinned version is already there. Prints the cuobjdump path.
set -euo pipefail

version="${FASTATTN_DISASM_VERSION:-13.2.78}"   # any 13.x reads the sm_80/sm_90a cubins of nvcc 13.0
py="${PYTHON:-python3}"

installed() {
  "$py" -m pip show "$1" 2>/dev/null | awk '/^Version:/ {print $2}'
}

if [[ "$(installed nvidia-cuda-cuobjdump)" != "$version" || "$(installed nvidia-cuda-nvdisasm)" != "$version" ]]; then
  pkgs=("nvidia-cuda-cuobjdump==$version" "nvidia-cuda-nvdisasm==$version")
  # An externally managed (Debian) python refuses plain installs; fall back to the user site.
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps "${pkgs[@]}" ||
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps --user --break-system-packages "${pkgs[@]}"
fi

bin_dir="$("$py" - <<'PY'
import os, site, sysconfig
for base in (sysconfig.get_paths()["purelib"], site.getusersitepackages()):
    d = os.path.join(base, "nvidia", "cu13", "bin")
    if os.access(os.path.join(d, "cuobjdump"), os.X_OK):
        print(d)
        break
PY
)"
if [[ -z "$bin_dir" ]]; then
  echo "install-disasm: cuobjdump not found after installing the wheels" >&2
  exit 1
fi
"$bin_dir/cuobjdump" --version | tail -n 1 >&2
echo "$bin_dir/cuobjdump"
