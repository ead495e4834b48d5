// Declaration of the Hopper backward launcher; its (dtype, d_qk, d_v) instances are compiled in the
// generated bwd_<dtype>_d<dim>.cu files (bwd_<dtype>_d<dim>_v<d_v>.cu where d_v differs), and listed in the
// generated bwd_dispatch.inc.
#pragma once

#include <cuda_runtime.h>

#include "api/problem.h"
#include "cuda/common/bwd_params.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {
template <class T, int D, int DV = D>
Status launch_bwd(const detail::Problem& problem, const detail::GradOperands& grads, const cuda_backend::BwdParams& p,
                  cudaStream_t stream);
}
