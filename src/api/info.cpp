// What this build and machine can run.
#include <string>

#include "fastattn/fastattn.h"

#ifdef FASTATTN_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

#ifndef FASTATTN_VERSION
#define FASTATTN_VERSION "unknown"
#endif

namespace fastattn {

bool cuda_available() {
#ifdef FASTATTN_WITH_CUDA
  return cuda_backend::available();
#else
  return false;
#endif
}

const char* version() { return FASTATTN_VERSION; }

const char* build_info() {
  static const std::string info = std::string("fastattn ") + FASTATTN_VERSION +
                                  "; cpu: tiled online-softmax forward+backward, fp16/bf16/fp32, "
                                  "head_dim 1..1024; reference: float64; " +
#ifdef FASTATTN_WITH_CUDA
                                  cuda_backend::build_info();
#else
                                  "cuda: built without CUDA";
#endif
  return info.c_str();
}

}  // namespace fastattn
