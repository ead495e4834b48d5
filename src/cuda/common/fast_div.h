// Division by a run-time constant as a multiply-high, an add and a shift (the round-up method of
// Granlund and Montgomery, 1994), for the tile coordinates a persistent kernel derives at every
// tile boundary: the divisors are fixed per launch, so the host computes the magic numbers once
// and the kernel reads them from its parameter bank (no register stays live across a tile).
// Each plain 32-bit unsigned division costs ~25-30 uniform-datapath instructions on sm_90; a
// FastDiv quotient costs 3.
//
// For a divisor d >= 1 let s = ceil(log2 d) and mul = floor(2^32 (2^s - d) / d) + 1 (< 2^32).
// Then n / d = (umulhi(n, mul) + n) >> s for every 0 <= n < 2^31; the sum cannot wrap because
// umulhi(n, mul) <= n. Tile ids and slot counts are below 2^31 (the host checks p.tiles).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FASTATTN_FD_HD __host__ __device__ __forceinline__
#else
#define FASTATTN_FD_HD inline
#endif

namespace fastattn::cuda_backend {

struct FastDiv {
  uint32_t d = 1, mul = 1, shift = 0;  // the identity (d = 1)

  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor < 1 ? 1 : divisor) {
    while ((uint64_t(1) << shift) < d) ++shift;
    mul = uint32_t((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d) / d + 1);
  }

  FASTATTN_FD_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    return (__umulhi(n, mul) + n) >> shift;
#else
    return (uint32_t((uint64_t(n) * mul) >> 32) + n) >> shift;
#endif
  }
  FASTATTN_FD_HD uint32_t mod(uint32_t n) const { return n - div(n) * d; }
};

}  // namespace fastattn::cuda_backend
