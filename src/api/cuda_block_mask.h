// Whether the CUDA backend runs a call with a block-sparse mask (MaskKind::BlockSparse).
#pragma once

#include "api/problem.h"

namespace fastattn::detail {

// True when the CUDA kernels apply p.blocks for this call (backward: the backward pass). A call
// the CUDA backend cannot mask is refused by validation (NotSupported), never run unmasked.
bool cuda_takes_block_mask(const Problem& p, bool backward);

}  // namespace fastattn::detail
