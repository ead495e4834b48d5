// Split-KV merged inside a thread-block cluster: where a launch gives every split tile its own CTA
// and a base tile's splits one cluster (sched/split_plan.h: merge_in_cluster; cluster rank =
// split), each CTA keeps its partial rows in its own smem (cluster_partials.cuh, written by
// store_partial), the cluster meets at one barrier (release / acquire at cluster scope: no
// GPU-scope fence, no flags, no global partials), and its CTAs then merge the tile's stored rows
// side by side, reading the other CTAs' partials through distributed shared memory: tile row t
// goes to CTA t % splits, consumer warp t / splits % 8. The merge is the combine kernel's
// arithmetic (split_merge_math.cuh: lane s holds split s's LSE, the same shuffles, the splits'
// fmaf chain in order), so out and lse are bitwise the combine kernel's. A second barrier keeps
// every CTA's smem alive until the others have read it.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/element.cuh"
#include "cuda/split_merge_math.cuh"
#include "cuda/sm90/fwd/cluster_partials.cuh"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

constexpr int kMaxClusterSplits = 8;  // the portable cluster size

// barrier.cluster over the cluster's non-exited threads (the producer warpgroup has left by then):
// the arrive releases (ptxas: MEMBAR.ALL.GPU, which waits for the CTA's outstanding stores) and the
// wait acquires.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
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
__device__ __forceinline__ float ld_cluster(uint32_t a) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_cluster4(uint32_t a) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(a)
               : "memory");
  return v;
}

// Tile row t merged from the cluster's `splits` CTAs by one warp, held until it is stored: lane l
// holds columns c0 + 4 l, + 4 of each 128-column step.
template <class Cfg>
struct MergedRow {
  static constexpr int kSteps = (Cfg::kHeadDim + 127) / 128;
  float4 acc[kSteps];
  float inv, lse;
  StoredRow w;
};

template <class Cfg>
__device__ __forceinline__ void merge_row(FwdSmem<Cfg>& sm, int t, int splits, int lane, MergedRow<Cfg>& row) {
  constexpr int D = Cfg::kHeadDim;
  const float ls0 = lane < splits ? ld_cluster(cluster_map(smem_addr(&sm.merge.lse[t]), lane)) : -INFINITY;
  const float m = cuda_backend::warp_max(ls0);
  const float w0 = cuda_backend::merge_weight(ls0, m);
  const float sum = cuda_backend::warp_sum(w0);
  row.inv = cuda_backend::merged_inv(sum);
  row.lse = cuda_backend::merged_lse(m, sum);
  const uint32_t base = smem_addr(partial_row<Cfg>(sm, t));
#pragma unroll
  for (int step = 0; step < MergedRow<Cfg>::kSteps; ++step) {
    // Every lane walks every column step (the weights' shuffles need the whole warp); a lane past
    // D loads a valid column and stores nothing.
    const int c = min(128 * step + 4 * lane, D - 4);
    const uint32_t at = base + 4 * partial_chunk(t, c / 4);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (m != -INFINITY) {
      float4 x[kMaxClusterSplits];
#pragma unroll
      for (int k = 0; k < kMaxClusterSplits; ++k) x[k] = ld_cluster4(cluster_map(at, unsigned(min(k, splits - 1))));
#pragma unroll
      for (int k = 0; k < kMaxClusterSplits; ++k)  // lanes past the last split hold weight 0
        cuda_backend::add_weighted(acc, __shfl_sync(0xffffffffu, w0, k), x[k]);
    }
    row.acc[step] = acc;
  }
}

template <class T, class Cfg>
__device__ __forceinline__ void store_merged(const FwdParams& p, const FwdTile& e, const MergedRow<Cfg>& row,
                                             int lane) {
  constexpr int D = Cfg::kHeadDim;
  const cuda_backend::AttnParams& a = p.attn;
  const int64_t b_off = e.seq.batch_coord, head = e.head + row.w.g, token = e.seq.q_offset + row.w.r;
  T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + token * a.out_stride_s + head * a.out_stride_h;
#pragma unroll
  for (int step = 0; step < MergedRow<Cfg>::kSteps; ++step) {
    const int c = 128 * step + 4 * lane;
    if (c < D) cuda_backend::store_merged4(out, c, row.acc[step], row.inv);
  }
  if (lane == 0 && a.lse != nullptr) a.lse[b_off * a.lse_stride_b + head * a.lse_stride_h + token * a.lse_stride_s] = row.lse;
}

// The consumer warps, after their tile's partials are in smem: meet the cluster, merge this CTA's
// share of the stored rows (tile row t to CTA t % splits, warp t / splits % 8; at most 4 a warp),
// meet again once every read of the others' smem has returned (the arrive releases them; the out
// stores come after it, so it does not wait for them), store, and leave when all have read.
template <class T, class Cfg>
__device__ __forceinline__ void cluster_merge(FwdSmem<Cfg>& sm, const FwdParams& p) {
  constexpr int kWarps = 4 * Cfg::kConsumerWarpgroups;
  constexpr int kRowsPerWarp = kClusterMergeRows / (2 * kWarps);  // at 2 splits, the fewest
  cluster_arrive();
  // While the other CTAs finish: this CTA's tile again (a cluster launch gives each CTA one; its
  // base tile is the cluster's).
  TileWalk walk;
  const bool has_tile = walk.next<Cfg>(p);
  const FwdTile& e = walk.t;
  const int splits = int(p.split.splits.d), lane = threadIdx.x % 32, warp = threadIdx.x / 32 - 4;
  const int first = int(cluster_rank()) + splits * warp;
  const int heads = has_tile ? min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head) : 0;
  MergedRow<Cfg> rows[kRowsPerWarp];
  cluster_wait();
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int t = first + i * splits * kWarps;
    rows[i].w.keep = false;
    if (!has_tile || t >= kClusterMergeRows) continue;
    float inv = 1.f, lse = 0.f;  // unused: the partials carry the rows past seqused as o 0, lse -inf
    rows[i].w = stored_row(p, e, t, heads, inv, lse);
    if (rows[i].w.keep) merge_row<Cfg>(sm, t, splits, lane, rows[i]);
  }
  cluster_arrive();
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
    if (rows[i].w.keep) store_merged<T, Cfg>(p, e, rows[i], lane);
  cluster_wait();
}

}  // namespace fastattn::sm90
