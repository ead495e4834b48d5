// Declaration of the Hopper split-D forward's launcher (d_qk, d_v up to 1024: cuda/splitd_rule.h);
// one instance per dtype, compiled in the generated fwd_splitd_<dtype>.cu, listed in the generated
// fwd_splitd_dispatch.inc.
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch_plan.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {
template <class T>
Status launch_fwd_splitd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
}
