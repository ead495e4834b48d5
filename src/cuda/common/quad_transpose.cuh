// A 4 x 4 transpose of 32-bit values across the four lanes of a quad (lanes 4i .. 4i + 3), for
// stores from the MMA accumulator layout: there lane c of a quad holds, in each 8-column group k,
// the element pair at columns 8k + 2c, + 1 (one packed 32-bit register). After the transpose over
// four consecutive groups, lane c holds all 8 columns of group c in order: one 16-byte store
// instead of four 4-byte ones, and a warp's store covers 64 contiguous bytes per row instead of 16.
// Two butterfly stages (xor 1, xor 2), 4 shuffles and 16 selects; every lane of the warp must take
// part (the shuffles are warp-synchronous), so callers predicate only the store.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

// m[k]: this lane's (quad lane c) pair of group k. Returns groups' pairs of group c from lanes
// 0, 1, 2, 3 (x, y, z, w).
__device__ __forceinline__ uint4 quad_transpose(const uint32_t (&m)[4], int quad_lane) {
  const bool b0 = quad_lane & 1, b1 = quad_lane & 2;
  // Stage 1: keep the groups whose bit 0 is this lane's (b0, b0 + 2), trade the others with lane c ^ 1.
  const uint32_t keep_a = b0 ? m[1] : m[0], keep_b = b0 ? m[3] : m[2];
  const uint32_t got_a = __shfl_xor_sync(0xffffffffu, b0 ? m[0] : m[1], 1);
  const uint32_t got_b = __shfl_xor_sync(0xffffffffu, b0 ? m[2] : m[3], 1);
  // Now lanes c, c ^ 1 of groups b0 (keep_a, got_a) and b0 + 2 (keep_b, got_b). Stage 2: keep
  // group c (= b0 + 2 b1), trade group c ^ 2 with lane c ^ 2.
  const uint32_t mine0 = b1 ? keep_b : keep_a, mine1 = b1 ? got_b : got_a;  // lanes c, c ^ 1
  const uint32_t far0 = __shfl_xor_sync(0xffffffffu, b1 ? keep_a : keep_b, 2);  // lane c ^ 2
  const uint32_t far1 = __shfl_xor_sync(0xffffffffu, b1 ? got_a : got_b, 2);    // lane c ^ 3
  // Into lane order: lanes {0, 1} are this lane's pair when b1 = 0, else the far pair; inside a
  // pair the first is this lane's parity.
  const uint32_t lo0 = b1 ? far0 : mine0, lo1 = b1 ? far1 : mine1;
  const uint32_t hi0 = b1 ? mine0 : far0, hi1 = b1 ? mine1 : far1;
  return b0 ? make_uint4(lo1, lo0, hi1, hi0) : make_uint4(lo0, lo1, hi0, hi1);
}

}  // namespace fastattn::cuda_backend
