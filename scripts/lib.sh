# Helpers shared by the scripts in this folder; source it, do not run it.

# The repository root, whatever the caller's working directory.
FASTATTN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# pip: a distribution's Python (PEP 668) may be installed into here; no nagging in logs.
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

log() { printf '==> %s\n' "$*"; }

# nvcc is often installed without being on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
have_nvcc() { command -v nvcc >/dev/null 2>&1; }

# A GPU is "present" when nvidia-smi lists one.
have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

# FASTATTN_CUDA_ARCHS for the GPUs of this machine: 90a for Hopper, 80 for Ampere/Ada.
gpu_archs() {
  local caps arch out=()
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u)
  for cap in $caps; do
    case "$cap" in
      9.*) arch=90a ;;
      8.*) arch=80 ;;
      *) continue ;;
    esac
    [[ " ${out[*]} " == *" $arch "* ]] || out+=("$arch")
  done
  local IFS=';'
  echo "${out[*]:-90a;80}"
}

jobs_count() { nproc 2>/dev/null || echo 2; }

# Seconds since the epoch, with decimals; and the difference of two of them.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }
