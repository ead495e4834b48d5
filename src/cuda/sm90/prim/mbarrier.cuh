// mbarrier operations of the TMA producer / WGMMA consumer ring (sm_90).
#pragma once

#include <cuda/ptx>
#include <cstdint>

#include "cuda/common/pipe_state.h"

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

// mbar_wait for bytes that other CTAs of the cluster stored (st.async): their completion releases
// at cluster scope, so the wait acquires at cluster scope.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, bar, parity)) {
  }
}

// A one-off wait by the thread that announces the bytes: the arrival's state token names the phase,
// so the caller keeps no parity in a register.
__device__ __forceinline__ uint64_t mbar_expect_tx_token(uint64_t* bar, uint32_t bytes) {
  return cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                              bar, bytes);
}
__device__ __forceinline__ void mbar_wait_token(uint64_t* bar, uint64_t state) {
  while (!cuda::ptx::mbarrier_try_wait(bar, state)) {
  }
}

// The ring state is arch-neutral (common/pipe_state.h); the Hopper kernels name it unqualified.
using cuda_backend::PipeState;

}  // namespace fastattn::sm90
