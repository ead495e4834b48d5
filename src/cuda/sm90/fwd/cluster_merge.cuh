// Split-KV merged inside a thread-block cluster: where a launch gives every split tile its own CTA
// and a base tile's splits one cluster (sched/split_plan.h: merge_in_cluster; cluster rank =
// split), each CTA pushes its partial rows into the smem of the row's merging CTA (t % splits; the
// epilogue's store_partial, cluster_partials.cuh), whose mbarrier counts the bytes. A CTA then
// waits for the bytes of the rows it merges (no cluster barrier after the stream, so no GPU-scope
// fence; only the start-up's relaxed one, which orders the mbarrier's init before any push; no
// flags, no global partials) and merges each from its own smem: tile row t to consumer warp t / splits %
// 8. The merge is the combine kernel's arithmetic (split_merge_math.cuh: lane s holds split s's
// LSE, the same shuffles, the splits' fmaf chain in order), so out and lse are bitwise the combine
// kernel's. No CTA reads another's smem, so none waits for the others to leave.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/element.cuh"
#include "cuda/split_merge_math.cuh"
#include "cuda/sm90/fwd/cluster_partials.cuh"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/cluster.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"

namespace fastattn::sm90 {

constexpr int kMaxClusterSplits = 8;  // the portable cluster size

// Tile row t merged from the cluster's `splits` CTAs by one warp, held until it is stored: lane l
// holds columns c0 + 4 l, + 4 of each 128-column step.
template <class Cfg>
struct MergedRow {
  static constexpr int kSteps = (Cfg::kHeadDimV + 127) / 128;
  float4 acc[kSteps];
  float inv, lse;
  StoredRow w;
};

// The row whose slot group starts at slot0 (split s's copy in slot slot0 + s).
template <class Cfg>
__device__ __forceinline__ void merge_row(FwdSmem<Cfg>& sm, int slot0, int splits, int lane, MergedRow<Cfg>& row) {
  constexpr int D = Cfg::kHeadDimV;
  const float ls0 = lane < splits ? sm.merge.lse[slot0 + lane] : -INFINITY;
  const float m = cuda_backend::warp_max(ls0);
  const float w0 = cuda_backend::merge_weight(ls0, m);
  const float sum = cuda_backend::warp_sum(w0);
  const bool nan = cuda_backend::warp_any_nan(ls0 != ls0);
  row.inv = cuda_backend::merged_inv(sum, nan);
  row.lse = cuda_backend::merged_lse(m, sum, nan);
#pragma unroll
  for (int step = 0; step < MergedRow<Cfg>::kSteps; ++step) {
    // Every lane walks every column step (the weights' shuffles need the whole warp); a lane past
    // D loads a valid column and stores nothing.
    const int c = min(128 * step + 4 * lane, D - 4);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (m != -INFINITY) {
      float4 x[kMaxClusterSplits];
#pragma unroll
      for (int k = 0; k < kMaxClusterSplits; ++k) {
        const int slot = slot0 + min(k, splits - 1);
        x[k] = *reinterpret_cast<const float4*>(partial_row<Cfg>(sm, slot) + partial_chunk(slot, c / 4));
      }
#pragma unroll
      for (int k = 0; k < kMaxClusterSplits; ++k)  // lanes past the last split hold weight 0
        cuda_backend::add_weighted(acc, __shfl_sync(0xffffffffu, w0, k), x[k]);
    }
    row.acc[step] = acc;
  }
}

template <class T, class Cfg>
__device__ __forceinline__ void store_merged(const FwdParams& p, const FwdTileFor<Cfg>& e, const MergedRow<Cfg>& row,
                                             int lane) {
  constexpr int D = Cfg::kHeadDimV;
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

// This CTA's share of its cluster's merge: its tile (a cluster launch gives each CTA one; its base
// tile is the cluster's) and the slot groups j it merges (rank r: tile row j x splits + r, slots
// from j x splits), at most 32 (2 splits).
template <class Cfg>
struct MergeShare {
  TileWalk<Cfg> walk;
  bool has_tile;
  int splits, rank, heads;

  // Group j's row, kept if it is stored and its group fits (the rows store_partial pushes).
  __device__ __forceinline__ StoredRow row(const FwdParams& p, int j) const {
    float inv = 1.f, lse = 0.f;  // unused: the partials carry the rows past seqused as lse -inf (o unread)
    StoredRow w = stored_row(p, walk.t, j * splits + rank, heads, inv, lse);
    w.keep = has_tile && group_fits(j * splits, splits) && w.keep;
    return w;
  }
};

template <class Cfg>
__device__ __forceinline__ MergeShare<Cfg> merge_share(const FwdParams& p) {
  MergeShare<Cfg> s;
  s.has_tile = s.walk.next(p);
  s.splits = int(p.split.splits.d);
  s.rank = int(cluster_rank());
  s.heads = s.has_tile ? min(p.sched.pack_heads, (s.walk.t.kv_head + 1) * p.attn.q_per_kv - s.walk.t.head) : 0;
  return s;
}

// The bytes this CTA's merge waits for, announced on merge.full by the first consumer warp before
// its stream (a lane per slot group): the tile is known at the start, so the count is off the path
// from the cluster's last partial to the merge.
template <class Cfg>
__device__ __forceinline__ void announce_merge_bytes(FwdSmem<Cfg>& sm, const FwdParams& p) {
  static_assert(kClusterMergeRows / 2 <= 32, "a lane per slot group");
  const MergeShare<Cfg> share = merge_share<Cfg>(p);
  const int lane = threadIdx.x % 32;
  const unsigned rows = __popc(__ballot_sync(0xffffffffu, share.row(p, lane).keep));
  if (lane == 0) mbar_expect_tx(&sm.merge.full, rows * uint32_t(share.splits) * kMergeRowBytes<Cfg>);
}

// The consumer warps, after their tile's partials are pushed (the bytes were announced before the
// stream: announce_merge_bytes): this CTA's tile again, and once every split's rows have landed,
// the merge and the stores, slot group j by consumer warp j % 8.
template <class T, class Cfg>
__device__ __forceinline__ void cluster_merge(FwdSmem<Cfg>& sm, const FwdParams& p) {
  constexpr int kWarps = 4 * Cfg::kConsumerWarpgroups;
  constexpr int kRowsPerWarp = kClusterMergeRows / (2 * kWarps);  // at 2 splits, the fewest
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 - 4;
  const MergeShare<Cfg> share = merge_share<Cfg>(p);
  MergedRow<Cfg> rows[kRowsPerWarp];
  bool waited = false;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int j = warp + i * kWarps;
    rows[i].w = share.row(p, j);
    if (!rows[i].w.keep) continue;
    if (!waited) mbar_wait_cluster(&sm.merge.full, 0);  // every split's rows for this CTA have landed
    waited = true;
    merge_row<Cfg>(sm, j * share.splits, share.splits, lane, rows[i]);
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
    if (rows[i].w.keep) store_merged<T, Cfg>(p, share.walk.t, rows[i], lane);
}

}  // namespace fastattn::sm90
