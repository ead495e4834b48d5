// Which calls with an additive bias (AttnArgs::bias) or ALiBi (AttnArgs::alibi_slopes, run by the same
// kernels with the term computed) the CUDA backend runs, in one place each for
// the forward and the backward (validation asks these through check_forward / check_backward; the
// forward asks bias_problem_support again on the resolved problem).
#pragma once

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// The forward: the sm90 kernels of d <= 128 with d_v = d (the masked units' rows), a bias of q's
// dtype (any strides), no split-KV; with a block-sparse mask or a bitmask their kernels' bias twins (block_mask_rule.h's
// rules). `major`: the device's compute capability.
Status bias_forward_support(const AttnArgs& args, int major);
Status bias_problem_support(const detail::Problem& p, int major);

// The backward (bias and dbias): sm90's bias kernel only (`major`: the device's compute capability; the
// sm80 backward has no bias path and would drop the bias silently).
Status bias_backward_support(const AttnArgs& args, int major);

}  // namespace fastattn::cuda_backend
