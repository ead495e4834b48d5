// Declaration of the Ampere (sm_80) forward launcher; its (dtype, d) instances are compiled in the
// generated sm80/fwd_<dtype>_d<d>.cu files and listed in fwd_dispatch.inc (src/cuda/sources.cmake).
// What it does not take (split-KV, block-sparse masks, KV caches, the backward) check_forward and
// forward refuse by name before it is reached (backend.cu).
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch_plan.h"
#include "fastattn/types.h"

namespace fastattn::sm80 {
template <class T, int D, int DV = D>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
}
