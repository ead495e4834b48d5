// CUDA backend entry: device discovery and dispatch to the per-arch kernels.
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"

namespace fastattn::cuda_backend {

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Status check_forward(const AttnArgs& args) {
  return Status::Unsupported("CUDA forward: no kernel built yet");
}

Status forward(const AttnArgs& args, float scale, void* stream) {
  return Status::Unsupported("CUDA forward: no kernel built yet");
}

const char* build_info() { return "cuda: no kernels yet"; }

}  // namespace fastattn::cuda_backend
