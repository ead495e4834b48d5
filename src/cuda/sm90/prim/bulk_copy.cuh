// Non-tensor bulk copies (sm_90): contiguous runs between global and shared memory through the TMA
// unit. Loads complete on an mbarrier (complete_tx), like tma_load_4d; the fp32 reduce-add into
// global memory runs in the issuing thread's bulk group (commit / wait as tma.cuh's stores).
#pragma once

#include <cuda/ptx>
#include <cstdint>

namespace fastattn::sm90 {

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global `src` into smem `dst`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

// global[dst, dst + bytes) += smem[src, src + bytes) element-wise in fp32, performed by the L2's
// atomic units (so CTAs adding into the same run do not race). Bytes: a multiple of 16, both
// addresses 16-byte aligned. Commit with tma_store_commit(); before overwriting src, wait with
// tma_store_wait_read(); before another CTA may read dst, tma_store_wait_all().
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add, dst, src,
                                  bytes);
}

// The same add with an L2 policy that keeps dst's lines resident (evict_last): for an accumulator
// that other CTAs go on adding into and a later kernel reads (the backward's dQ).
__device__ __forceinline__ void bulk_reduce_add_f32_evict_last(float* dst, const float* src, uint32_t bytes) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32 [%0], [%1], %2, %3;" ::"l"(dst),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(bytes), "l"(policy)
               : "memory");
}

}  // namespace fastattn::sm90
