// Keep-bit masks in the accumulator layout of a 64xN warpgroup MMA (and of mma.sync m16n8).
//
// A thread holds, for each of its rows, the columns 8*j + 2*t + e (t = lane % 4, e = 0/1): with
// k = 2*j + e these are increasing in k, so "column < limit" is a prefix of k and a window
// [lo, hi) is one 32-bit word: bits(hi) & ~bits(lo). Applying the word with constant shifts in
// an unrolled loop lets ptxas emit R2P (7 predicates per instruction) + FSEL instead of one
// ISETP per element (seed 000).
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

// How many of this thread's columns of a row lie below the tile-local column `limit`.
__device__ __forceinline__ int thread_cols_below(int limit, int t) {
  const int x = limit - 2 * t;
  if (x <= 0) return 0;
  return 2 * (x >> 3) + min(x & 7, 2);
}

__device__ __forceinline__ uint32_t low_bits(int n) { return n >= 32 ? 0xffffffffu : ((1u << max(n, 0)) - 1u); }

// This thread's keep-bits of one row of an N-column tile: N/4 columns, one bit each, in 32-bit words
// (two when N > 128; ptxas still emits R2P per word).
template <int N>
struct KeepBits {
  static constexpr int kWords = (N / 4 + 31) / 32;
  uint32_t w[kWords];
};

// Keep-bits of this thread's columns for the tile-local window [lo, hi).
template <int N>
__device__ __forceinline__ KeepBits<N> keep_bits(int lo, int hi, int t) {
  const int below_lo = thread_cols_below(lo, t), below_hi = thread_cols_below(hi, t);
  KeepBits<N> kb;
#pragma unroll
  for (int i = 0; i < KeepBits<N>::kWords; ++i)
    kb.w[i] = low_bits(below_hi - 32 * i) & ~low_bits(below_lo - 32 * i);
  return kb;
}

// Sets masked scores of row half `h` (rows g and g + 8) to -inf. Acc has N/2 floats laid out as
// acc[4*j + 2*h + e]; bit k = 2*j + e of `keep` says whether that element survives.
template <int N, int H>
__device__ __forceinline__ void apply_keep_bits(float (&acc)[N / 2], const KeepBits<N>& keep) {
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    const int idx = 4 * (k >> 1) + 2 * H + (k & 1);
    acc[idx] = (keep.w[k / 32] >> (k % 32)) & 1u ? acc[idx] : -INFINITY;
  }
}

}  // namespace fastattn::cuda_backend
