// Where a split CTA keeps its partial rows for the merge inside its cluster (cluster_merge.cuh):
// fp32 O of tile row t < kClusterMergeRows in the spare Q buffer (a CTA of a cluster launch has
// one tile, which uses Q buffer 0), D floats a row, its 16-byte chunks XOR-swizzled by t % 8 so
// that the fragment stores (a warp writes one column pair of 8 rows) and the merge's reads (a
// warp reads a row's 32 chunks) are both free of bank conflicts; the LSE in FwdSmem::merge.
#pragma once

#include "cuda/sm90/fwd/tile.cuh"

namespace fastattn::sm90 {

template <class Cfg>
__device__ __forceinline__ float* partial_row(FwdSmem<Cfg>& sm, int t) {
  static_assert(Cfg::kQBuffers == 2 && kClusterMergeRows * Cfg::kHeadDim * 4 <= Cfg::kQBytes,
                "the kept rows fit the spare Q buffer");
  static_assert(Cfg::kHeadDim % 32 == 0, "the swizzle permutes chunks within groups of 8");
  return reinterpret_cast<float*>(sm.q[1]) + t * Cfg::kHeadDim;
}

// Float offset in row t of columns [4 chunk, 4 chunk + 4).
__device__ __forceinline__ int partial_chunk(int t, int chunk) { return 4 * (chunk ^ (t & 7)); }

}  // namespace fastattn::sm90
