// TMA (bulk tensor copy) between global memory and 128-byte-swizzled smem atoms: loads complete on
// an mbarrier, stores in bulk groups of the issuing thread.
#pragma once

#include <cuda.h>
#include <cuda/ptx>
#include <cstdint>

namespace fastattn::sm90 {

// 4-D tiled load: coords are (column, row, head, batch), innermost first.
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint64_t* bar) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

// 5-D tiled load: coords innermost first (a paged cache's key-half box: column, position in the
// page, atom, head, page; cuda/tma_map.h's make_tma_map_by_atom).
__device__ __forceinline__ void tma_load_5d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            int c3, int c4, uint64_t* bar) {
  const int32_t coords[5] = {c0, c1, c2, c3, c4};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, map,
                                  coords, bar);
}

// 4-D tiled store from smem (same coords); rows past the tensor's extent are not written.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* smem_src, int c0, int c1, int c2,
                                             int c3) {
  const uint32_t src = static_cast<uint32_t>(__cvta_generic_to_shared(smem_src));
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until this thread's stores have read their smem (it may be overwritten), or fully completed.
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Makes this thread's ordinary smem writes visible to the TMA unit (the async proxy).
__device__ __forceinline__ void fence_smem_for_tma() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void prefetch_tma_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
template <class... Maps>
__device__ __forceinline__ void prefetch_tma_maps(const Maps*... maps) {
  (prefetch_tma_map(maps), ...);
}

}  // namespace fastattn::sm90
