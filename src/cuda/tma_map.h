// Host side of TMA: encodes a CUtensorMap for a (batch, seq, heads, dim) tensor, tiled into
// 64-column x `box_rows` x `box_heads` boxes with the 128-byte swizzle that wgmma descriptors
// expect (a box lands in smem as box_heads * box_rows consecutive 128-byte rows, head-major).
#pragma once

#include <cuda.h>

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// `t` is (b, s, h, d) or, for varlen, (total, h, d). Strides must be multiples of 16 bytes
// (checked before, in check_forward).
Status make_tma_map(const Tensor& t, int box_rows, CUtensorMap* out, int box_heads = 1);

// Whether TMA can store into `t` tile by tile: fixed-length (b, s, h, d), unit last stride, base and
// every stride of a dim longer than 1 a multiple of 16 bytes.
bool tma_storable(const Tensor& t);

}  // namespace fastattn::cuda_backend
