// Validation of a block-sparse mask (MaskKind::BlockSparse, fastattn::BlockMask): where it lives,
// its shape against the call's batch, heads and longest sequences, and its block sizes; and of an
// element bitmask (MaskKind::DenseBitmask, fastattn::BitMask) likewise.
#pragma once

#include <cstdint>
#include <vector>

#include "api/index_arrays.h"
#include "fastattn/types.h"

namespace fastattn::detail {

// The longest sequence of one side: the fixed length, else max_seqlen when given (> 0), else the
// longest of the host-read cu_seqlens (0 when they could not be read). What a mask's or bias's
// rows / cols must cover.
int64_t longest(bool varlen, int64_t fixed, int32_t max_seqlen, const std::vector<int32_t>& cu);

// args.mask.blocks of a call whose tensors and index arrays already passed their checks. `idx`:
// the host copies of the index arrays (varlen lengths come from them when max_seqlen is 0).
// Also refuses a block array given with a mask kind other than BlockSparse (it would be ignored).
Status check_block_mask(const AttnArgs& args, bool varlen, const HostIndexArrays& idx);

// args.mask.bits (MaskKind::DenseBitmask), as check_block_mask: device, dims (mask_batch 1 or batch,
// mask_heads dividing heads_q, rows and words covering the longest sequences). Also refuses bits
// given with another mask kind.
Status check_bit_mask(const AttnArgs& args, bool varlen, const HostIndexArrays& idx);

}  // namespace fastattn::detail
