// Declaration of the Hopper backward launcher; its (dtype, head dim) instances are compiled in the
// generated bwd_<dtype>_d<dim>.cu files, and listed in the generated bwd_dispatch.inc.
#pragma once

#include <cuda_runtime.h>

#include "api/problem.h"
#include "cuda/common/bwd_params.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {
template <class T, int D>
Status launch_bwd(const detail::Problem& problem, const detail::GradOperands& grads, const cuda_backend::BwdParams& p,
                  cudaStream_t stream);
}
