// Split-KV planning of a forward launch (host, no device query: the CPU tests run it): how many
// splits each tile's keys get, and the size of the partials' workspace.
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/split_heuristic.h"
#include "cuda/common/attn_params.h"
#include "cuda/mask/mask_class.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/tile_space.h"

namespace fastattn::cuda_backend {

// The merge inside thread-block clusters (sm90/fwd/cluster_merge.cuh): a base tile's splits form
// one cluster of at most kClusterMaxSplits CTAs (the portable cluster size); tile row t is merged
// by the cluster's CTA t % splits, which receives every split's copy of it in one of its
// kClusterKeptRows slots: slot t - t % splits + split (sm90/fwd/cluster_partials.cuh).
constexpr int kClusterMaxSplits = 8;
constexpr int kClusterKeptRows = 64;

// The rows a GQA-packed tile stores: (heads - 1) x R + s_q (the last head's rows end at s_q).
inline int64_t packed_tile_rows(const GqaPack& pack, int seqlen_q) {
  return int64_t(pack.heads - 1) * pack.rows + seqlen_q;
}

// The tile rows a split tile's stored rows can reach (rows [0, bound) of the tile): GQA-packed,
// (heads - 1) x R + s_q (the last head's rows end at s_q); unpacked, s_q where a sequence's rows start
// at tile row 0 (first_block_pad 0, as plan_splits plans a tile space of one m-block); else (rows at
// the tile's bottom, or a pack whose R is short of s_q) the whole tile.
inline int64_t stored_rows_bound(const GqaPack& pack, int seqlen_q, const TileSchedule& base) {
  if (pack.rows > 0) return seqlen_q <= pack.rows ? packed_tile_rows(pack, seqlen_q) : base.tile_rows;
  return base.first_block_pad == 0 ? std::min(seqlen_q, base.tile_rows) : base.tile_rows;
}

// Whether the rows of a split tile fit the cluster merge's slots at `splits`: stored rows
// (stored_rows_bound), rounded up to a multiple of `splits`, at most 64, with 2-8 splits.
inline bool cluster_rows_fit(int splits, const GqaPack& pack, int seqlen_q, const TileSchedule& base) {
  if (splits < 2 || splits > kClusterMaxSplits || seqlen_q < 1) return false;
  const int64_t rows = stored_rows_bound(pack, seqlen_q, base);
  return (rows + splits - 1) / splits * splits <= kClusterKeptRows;
}

// Whether a split launch merges its splits in clusters instead of by the combine kernel: every
// split tile then has its own CTA and every cluster runs in the first wave (`base_tiles` clusters
// of `splits` CTAs, at most `clusters_at_once` of them co-resident: cudaOccupancyMaxActiveClusters),
// and the tiles' rows fit the slots (cluster_rows_fit). Elsewhere (more splits, more clusters than
// a wave, tiles that store more rows or rows at a tile's bottom) the combine kernel merges.
inline bool merge_in_cluster(int splits, const TileSpace& base, const GqaPack& pack, int seqlen_q,
                             int clusters_at_once) {
  return cluster_rows_fit(splits, pack, seqlen_q, base.s) && base.tiles >= 1 && base.tiles <= clusters_at_once;
}

// Whether a split launch runs narrow (swapped) decode tiles (sm90/fwd/narrow_rows.cuh): its tiles store
// only rows 0-7 of their tile (stored_rows_bound <= 8: GQA-packed tiles of at most 8 stored rows, or
// unpacked ones of at most 8 query rows, which plan_splits keeps at tile row 0), and each split's share
// of the longest sequence's keys is at most kNarrowSplitKeys. Past that the narrow tile's 64-key blocks
// cost a paged cache (page 64) 5-13 % against the 64-row tile's key halves (H200, b 1 s 32k, b 4 s 8k-32k:
// 4096-16384 keys a split), while at 512-2048 keys a split they gained 1-10 % paged and 6-16 % contiguous
// (docs/notes/inference.md, session 53). The rule does not look at the paging, so a paged call and its
// contiguous twin run the same sums.
constexpr int kNarrowTileRows = 8;
constexpr int64_t kNarrowSplitKeys = 2048;
inline bool narrow_rows_fit(const GqaPack& pack, int seqlen_q, const TileSchedule& base, int seqlen_k, int splits) {
  if (seqlen_q < 1 || splits < 1 || (int64_t(seqlen_k) + splits - 1) / splits > kNarrowSplitKeys) return false;
  return stored_rows_bound(pack, seqlen_q, base) <= kNarrowTileRows;
}

// The split plan of a launch on `tile_rows` x `block_n` tiles over `sms` multiprocessors and HBM of
// `hbm_bytes_per_s` peak bandwidth (0: unknown, or a kernel whose per-CTA stream rate the heuristic
// was not measured on; a streaming decode then aims at half the SMs): its
// unsplit (base) tile space, planned once here for the split kernel (pad_first_ok: it stores O from
// registers) and handed to the cluster rule and the schedule, and its split count: `requested`
// when > 0 (the caller's num_splits, honoured even past the key blocks: those splits see no key),
// else the heuristic (api/split_heuristic.h) from the base tile count, the key blocks of the
// longest sequence (seqlen_k: the max bound when varlen) and the SM count; the launch streams K/V
// when it has one tile per (batch, KV head). (Until session 47 a d 128 decode whose splits merged
// in clusters took 1.5 x the count where each split kept >= 16 key blocks, measured 0.5 us faster
// at b2 8k on the H100; with the decode CTA's idle second warpgroup it ran 4-7 % slower on the H200
// at b2 8k-32k, docs/notes/inference.md.)
struct SplitPlan {
  int splits = 1;
  TileSpace base;
};

inline SplitPlan plan_splits(int requested, const AttnParams& a, MaskClass mask, const GqaPack& pack, int tile_rows,
                             int block_n, int sms, double hbm_bytes_per_s) {
  SplitPlan p;
  p.base = plan_tile_space(a, mask, pack, tile_rows, true);
  // A tile space of one m-block has no order to choose (every tile of a slot is its only one): its
  // rows stay at tile row 0, padding last, where the narrow tile and the cluster merge can take them.
  if (p.base.s.m_blocks == 1) {
    p.base.s.heavy_first = 0;
    p.base.s.first_block_pad = 0;
  }
  if (requested > 0) {
    p.splits = requested;
    return p;
  }
  detail::SplitShape shape;
  shape.tiles = p.base.tiles;
  shape.key_blocks = (int64_t(a.seqlen_k) + block_n - 1) / block_n;
  shape.sms = sms;
  shape.hbm_bytes_per_s = hbm_bytes_per_s;
  shape.streams_kv = p.base.tiles == int64_t(a.batch) * a.heads_kv;
  const int64_t rows = pack.rows > 0 ? packed_tile_rows(pack, a.seqlen_q) : std::min(a.seqlen_q, tile_rows);
  shape.one_warpgroup = rows <= 64;  // a consumer warpgroup's rows
  p.splits = std::max(1, int(detail::choose_num_splits(shape)));
  return p;
}

// Rows of one split's partials: every (batch, q head, query token), in the combine's order.
inline int64_t split_rows(const AttnParams& a, int64_t total_q) {
  return a.cu_seqlens_q != nullptr ? int64_t(a.heads_q) * total_q : int64_t(a.batch) * a.heads_q * a.seqlen_q;
}

// Bytes of the split workspace: fp32 partial O (splits, rows, d_v), then fp32 LSE (splits, rows),
// the LSE part 256-byte aligned.
inline int64_t split_workspace_bytes(int splits, int64_t rows, int dv) {
  const int64_t o = (int64_t(splits) * rows * dv * 4 + 255) / 256 * 256;
  return o + int64_t(splits) * rows * 4;
}

}  // namespace fastattn::cuda_backend
