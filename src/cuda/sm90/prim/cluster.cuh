// Thread-block cluster operations (sm_90): the cluster barrier, a CTA's rank, distributed shared
// memory addresses, and st.async, which stores into another CTA's smem and counts its bytes on an
// mbarrier there (the receiver waits for bytes, as for a TMA load: no fence and no cluster barrier
// after the pushes; the mbarrier's init is ordered before them by one relaxed barrier at start-up).
#pragma once

#include <cstdint>

namespace fastattn::sm90 {

// barrier.cluster over the cluster's non-exited threads. Relaxed: no release of this thread's
// memory operations (a plain arrive compiles to MEMBAR.ALL.GPU, which waits for the CTA's
// outstanding stores); the wait acquires.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// The address of this CTA's smem address `a` in the smem of the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t a, unsigned rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}

// Stores into the smem of a CTA of the cluster (`at`, from cluster_map) and completes their bytes
// on that CTA's mbarrier `bar` (cluster_map of the same CTA).
__device__ __forceinline__ void st_async(uint32_t at, float x, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(at),
               "r"(__float_as_uint(x)), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void st_async(uint32_t at, float x, float y, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(at),
               "r"(__float_as_uint(x)), "r"(__float_as_uint(y)), "r"(bar)
               : "memory");
}

}  // namespace fastattn::sm90
