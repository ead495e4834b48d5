// mbarrier pipeline state for the TMA producer / WGMMA consumer ring (sm_90).
#pragma once

#include <cuda/ptx>
#include <cstdint>

namespace fastattn::sm90 {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  cuda::ptx::mbarrier_init(bar, count);
}

// Producer: announce the bytes the coming TMA loads will deliver (and arrive once).
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                       cuda::ptx::space_shared, bar, bytes);
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  (void)cuda::ptx::mbarrier_arrive(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                   cuda::ptx::space_shared, bar);
}

// Blocks until the phase with the given parity has completed. A fresh barrier is in phase 0, so
// waiting on parity 1 passes at once: that is how the producer's first pass over "empty" works.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// (stage, phase) of a ring of S slots; the phase flips each time the ring wraps. One register
// (stage in the low byte, phase in bit 8), because one register instead of two is what keeps
// d = 256 free of spills; no division (a counter's `% 3` by multiply-high was ~1.5% of the d128
// loop's samples, ncu source counters, H100 2026-11-22).
template <int S>
struct PipeState {
  static_assert(S >= 1 && S < 256, "the stage fits the low byte");
  uint32_t bits = 0;
  __device__ __forceinline__ int stage() const { return int(bits & 0xffu); }
  __device__ __forceinline__ uint32_t phase() const { return bits >> 8; }
  __device__ __forceinline__ void advance() {
    bits = (bits & 0xffu) == S - 1 ? (bits & 0x100u) ^ 0x100u : bits + 1;
  }
};

}  // namespace fastattn::sm90
