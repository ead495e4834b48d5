// Whether the CUDA backend runs a call with a block-sparse mask (MaskKind::BlockSparse).
#pragma once

#include "api/problem.h"

namespace fastattn::detail {

// Ok when the CUDA kernels apply p.blocks for this call (backward: the backward pass); else
// NotSupported naming what the GPU cannot run. Validation returns it, so a call the CUDA backend
// cannot mask is refused, never run unmasked.
Status cuda_block_mask_support(const Problem& p, bool backward, bool deterministic = false);

}  // namespace fastattn::detail
