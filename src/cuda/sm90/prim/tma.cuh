// TMA (bulk tensor copy) loads into 128-byte-swizzled smem atoms, completing on an mbarrier.
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

__device__ __forceinline__ void prefetch_tma_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace fastattn::sm90
