// Which calls with an additive bias (AttnArgs::bias) the CUDA backend runs, in one place each for
// the forward and the backward (validation asks these through check_forward / check_backward).
#pragma once

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// The forward: refuses by name what has no bias kernel. `major`: the device's compute capability.
Status bias_forward_support(const AttnArgs& args, int major);

// The backward (bias and dbias).
Status bias_backward_support(const AttnArgs& args);

}  // namespace fastattn::cuda_backend
