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

// (stage, phase) of a ring of S slots; the phase flips each time the ring wraps. Kept as one
// counter (stage = count % S, phase = count / S parity): a persistent kernel carries it across
// tiles, and one register instead of two is what keeps d = 256 free of spills.
template <int S>
struct PipeState {
  uint32_t count = 0;
  __device__ __forceinline__ int stage() const { return int(count % S); }
  __device__ __forceinline__ uint32_t phase() const { return (count / S) & 1u; }
  __device__ __forceinline__ void advance() { ++count; }
};

}  // namespace fastattn::sm90
