// Plain-value views -> fastattn::Tensor / IndexArray: the torch fast path reads a tensor's pointer,
// shape, strides, dtype and device itself, so no DLPack capsule is made per tensor.
#pragma once

#include <nanobind/nanobind.h>

#include "fastattn/kvcache.h"
#include "fastattn/types.h"

namespace fastattn_py {

namespace nb = nanobind;

// A view is the tuple (data_ptr, shape, strides, dtype, device[, owner]):
//   dtype  0 float16, 1 bfloat16, 2 float32, 3 int32, 4 bool / uint8 (block masks), or any other object (its str() names an
//          unsupported dtype in the error);
//   device -1 the CPU, >= 0 that CUDA device, or a str naming an unsupported device;
//   owner  ignored: the caller puts the array there to keep a temporary copy alive.
// Raises ValueError naming `name` for an unsupported dtype, device or rank, TypeError for a
// malformed tuple.
fastattn::Tensor view_to_tensor(nb::handle view, const char* name);

// A 1-D contiguous int32 view on `where`'s device; raises ValueError naming `name`.
fastattn::IndexArray view_to_index(nb::handle view, const char* name, const fastattn::Tensor& where);

// A 4-D byte view (dtype code 4: bool or uint8, any strides) as a block mask with (block_q,
// block_k); raises ValueError naming `name` for another dtype or rank.
fastattn::BlockMask view_to_block_mask(nb::handle view, const char* name, int32_t block_q, int32_t block_k);

// A 4-D int32 view of packed element-mask words (mask_batch, mask_heads, rows, words; the word dim
// contiguous) as a bit mask, broadcast dims (size 1) at stride 0 as the DLPack path's to_bit_mask; raises
// ValueError naming `name` for another dtype, rank or a strided word dim.
fastattn::BitMask view_to_bit_mask(nb::handle view, const char* name);

// A 2-D C-contiguous int32 view (batch, pages_per_seq) on `where`'s device; raises ValueError
// naming `name` with the DLPack path's messages.
fastattn::PageTable view_to_page_table(nb::handle view, const char* name, const fastattn::Tensor& where);

}  // namespace fastattn_py
