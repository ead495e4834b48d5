// The kernel-menu rows this build compiled (src/cuda/sources.cmake generates fwd_dispatch.inc and
// sm90/bwd_dispatch.inc), per family: the CUDA checks accept what is built and name it when a
// call asks for something else. One table, in backend.cu.
#pragma once

#include <string>

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

enum class KernelFamily { Forward, Backward };

// Whether (dtype, d, d_v) is built for the family on compute capability `major`.
bool kernel_built(KernelFamily family, int major, DType dt, int d, int dv);

// The head dims built for the family on `major` and `dt` ("64, 96, 128"; "d/dv" where they
// differ), or "" when none.
std::string built_list(KernelFamily family, int major, DType dt);

}  // namespace fastattn::cuda_backend
