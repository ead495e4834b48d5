// Declaration of the Hopper forward launcher; its (dtype, head dim) instances are compiled in the
// generated fwd_<dtype>_d<dim>.cu files, and listed in the generated fwd_dispatch.inc.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/fwd_params.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {
template <class T, int D>
Status launch_fwd(const AttnArgs& args, const cuda_backend::FwdParams& p, cudaStream_t stream);
}
