// (stage, phase) of a producer/consumer ring of S slots, for mbarrier (sm_90) and cp.async (sm_80)
// pipelines alike: plain integer state, no arch-specific instruction.
#pragma once

#include <cstdint>

#ifndef __CUDACC__
#define FA_PIPE_FN inline
#else
#define FA_PIPE_FN __host__ __device__ __forceinline__
#endif

namespace fastattn::cuda_backend {

// The phase flips each time the ring wraps. One register (stage in the low byte, phase in bit 8),
// because one register instead of two is what keeps the d = 256 forward free of spills; no
// division (a counter's `% 3` by multiply-high was ~1.5% of the d128 loop's samples).
template <int S>
struct PipeState {
  static_assert(S >= 1 && S < 256, "the stage fits the low byte");
  uint32_t bits = 0;
  FA_PIPE_FN int stage() const { return int(bits & 0xffu); }
  FA_PIPE_FN uint32_t phase() const { return bits >> 8; }
  FA_PIPE_FN void advance() { bits = (bits & 0xffu) == S - 1 ? (bits & 0x100u) ^ 0x100u : bits + 1; }
};

}  // namespace fastattn::cuda_backend

#undef FA_PIPE_FN
