// Validation of a block-sparse mask (MaskKind::BlockSparse, fastattn::BlockMask): where it lives,
// its shape against the call's batch, heads and longest sequences, and its block sizes.
#pragma once

#include "api/index_arrays.h"
#include "fastattn/types.h"

namespace fastattn::detail {

// args.mask.blocks of a call whose tensors and index arrays already passed their checks. `idx`:
// the host copies of the index arrays (varlen lengths come from them when max_seqlen is 0).
// Also refuses a block array given with a mask kind other than BlockSparse (it would be ignored).
Status check_block_mask(const AttnArgs& args, bool varlen, const HostIndexArrays& idx);

}  // namespace fastattn::detail
