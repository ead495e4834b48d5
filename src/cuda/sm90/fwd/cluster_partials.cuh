// Where the splits' partial rows meet for the merge inside a cluster (cluster_merge.cuh): tile row
// t is merged by the cluster's CTA t % splits (its owner), which receives every split's copy of the
// row, split s's in slot t - t % splits + s. A slot is D floats of the owner's spare Q buffer (a
// CTA of a cluster launch has one tile, which uses Q buffer 0), its 16-byte chunks XOR-swizzled by
// slot % 8 so that the merge's row reads are free of bank conflicts and a warp's pushes of 8 rows
// spread over the banks; its LSE in FwdSmem::merge. Each split pushes its rows from registers with
// st.async, whose bytes complete on the owner's mbarrier (merge.full): the owner waits for bytes,
// not for a cluster barrier, and no CTA reads another's smem.
#pragma once

#include "cuda/common/fast_div.h"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/cluster.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

template <class Cfg>
__device__ __forceinline__ float* partial_row(FwdSmem<Cfg>& sm, int slot) {
  static_assert(Cfg::kQBuffers == 2 && kClusterMergeRows * Cfg::kHeadDimV * 4 <= Cfg::kQBytes,
                "the slots fit the spare Q buffer");
  static_assert(Cfg::kHeadDimV % 32 == 0, "the swizzle permutes chunks within groups of 8");
  return reinterpret_cast<float*>(sm.q[1]) + slot * Cfg::kHeadDimV;
}

// Float offset in a slot of columns [4 chunk, 4 chunk + 4).
__device__ __forceinline__ int partial_chunk(int slot, int chunk) { return 4 * (chunk ^ (slot & 7)); }

// Tile row t's slot group at its owner: the owner's rank (t % splits) and the group's first slot
// (t - t % splits; split s's copy in slot first + s).
struct MergeSlots {
  int owner, first;
};
__device__ __forceinline__ MergeSlots merge_slots(int t, const cuda_backend::FastDiv& splits) {
  const int first = int(splits.div(unsigned(t)) * splits.d);
  return {t - first, first};
}

// Whether a slot group fits the owner (the launch's rule, sched/split_plan.h: merge_in_cluster,
// puts every stored row's group below kClusterMergeRows). The pushers (here) and the owner's byte
// count (cluster_merge.cuh) must apply the same stored-row and group_fits rule: the owner waits for
// exactly the bytes it counted, so a row counted but not pushed would hang it (CPU tests pin the
// rule's edges; GPU test ClusterMergeSlotGroups).
__device__ __forceinline__ bool group_fits(int first, int splits) { return first + splits <= kClusterMergeRows; }

// Bytes one split pushes for one row: its O and its LSE.
template <class Cfg>
constexpr uint32_t kMergeRowBytes = 4 * Cfg::kHeadDimV + 4;

// A pushing CTA may exit with its pushes in flight (a CTA with no row to merge does). The PTX ISA
// (st.async) asks only that the destination and its mbarrier belong to one CTA of the cluster; the
// CUDA guide asks that a CTA's shared memory outlive every access to it, which the owner keeps by
// waiting for every byte before it merges and exits. Nothing binds the issuer's lifetime.
// Tile row t of split `split` (this CTA) to its owner, if its group fits: this thread's column
// pairs 8 j + 2 quad_col, + 1 of `o` (half h of the fragment) times inv, and with quad_col 0 the LSE.
template <class Cfg>
__device__ __forceinline__ void push_partial_row(FwdSmem<Cfg>& sm, int t, const cuda_backend::FastDiv& splits,
                                                 int split, int quad_col, const float (&o)[Cfg::kHeadDimV / 2], int h,
                                                 float inv, float lse) {
  const MergeSlots g = merge_slots(t, splits);
  if (!group_fits(g.first, int(splits.d))) return;
  const int slot = g.first + split;
  const uint32_t bar = cluster_map(smem_addr(&sm.merge.full), unsigned(g.owner));
  const uint32_t row = cluster_map(smem_addr(partial_row<Cfg>(sm, slot)), unsigned(g.owner));
#pragma unroll
  for (int j = 0; j < Cfg::kHeadDimV / 8; ++j)  // half of chunk 2 j + quad_col / 2
    st_async(row + 4 * (partial_chunk(slot, 2 * j + quad_col / 2) + 2 * (quad_col % 2)), o[4 * j + 2 * h] * inv,
             o[4 * j + 2 * h + 1] * inv, bar);
  if (quad_col == 0) st_async(cluster_map(smem_addr(&sm.merge.lse[slot]), unsigned(g.owner)), lse, bar);
}

}  // namespace fastattn::sm90
