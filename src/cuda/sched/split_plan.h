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

// Whether the rows of a split tile fit the cluster merge's slots at `splits`: GQA-packed tiles
// (decode) whose (heads - 1) x R + s_q stored rows, rounded up to a multiple of `splits`, are at
// most 64, with 2-8 splits. Unpacked tiles (their rows may sit at a tile's bottom) do not.
inline bool cluster_rows_fit(int splits, const GqaPack& pack, int seqlen_q) {
  if (splits < 2 || splits > kClusterMaxSplits || pack.rows <= 0 || seqlen_q < 1 || seqlen_q > pack.rows) return false;
  const int64_t rows = int64_t(pack.heads - 1) * pack.rows + seqlen_q;
  return (rows + splits - 1) / splits * splits <= kClusterKeptRows;
}

// Whether a split launch merges its splits in clusters instead of by the combine kernel: every
// split tile then has its own CTA and every cluster runs in the first wave (`base_tiles` clusters
// of `splits` CTAs, at most `clusters_at_once` of them co-resident: cudaOccupancyMaxActiveClusters),
// and the tiles' rows fit the slots (cluster_rows_fit). Elsewhere (more splits, more clusters than
// a wave, tiles that store more rows, unpacked tiles) the combine kernel merges.
inline bool merge_in_cluster(int splits, int64_t base_tiles, const GqaPack& pack, int seqlen_q, int clusters_at_once) {
  return cluster_rows_fit(splits, pack, seqlen_q) && base_tiles >= 1 && base_tiles <= clusters_at_once;
}

// Key blocks a split keeps before more splits of a streaming decode pay (wider_streaming_split).
constexpr int64_t kLongSplitBlocks = 16;

// The heuristic's count for a decode that streams K/V (the CTAs that saturate HBM), or 1.5 x as
// many where each split keeps >= kLongSplitBlocks key blocks, the count is even, its rows fit one
// cluster's merge and its CTAs stay within 3/4 of the SMs. Measured on the H100 (h 32/8 d 128,
// docs/notes/inference.md): b2 8k ran 6 splits (96 CTAs) 0.5 us under 4, b2 16k level, b2 4k (8
// blocks a split) 0.1-0.2 us over; b4 ran 3 splits (96 CTAs, odd clusters) 3-7 % over 2; past 8
// splits the combine kernel merges (b1: 12 splits 1.5 us over 8). On the H200 (session 47) the
// rule's counts were the sweep's best or within 2 % (b4: 2 splits; 3 ran 2 % under at 4k and 4 %
// over at 32k, 4 ran 1 % under at 32k and 1-2 % over at 4k-8k); the SM cap keeps it.
inline int wider_streaming_split(int splits, int64_t key_blocks, const GqaPack& pack, int seqlen_q, int64_t tiles,
                                 int sms) {
  const int wider = splits + splits / 2;
  const bool long_splits = key_blocks >= kLongSplitBlocks * splits;
  const bool within = 4 * int64_t(wider) * tiles <= 3 * int64_t(sms);
  return wider % 2 == 0 && long_splits && within && cluster_rows_fit(wider, pack, seqlen_q) ? wider : splits;
}

// The split plan of a launch on `tile_rows` x `block_n` tiles over `sms` multiprocessors and HBM of
// `hbm_bytes_per_s` peak bandwidth (0: unknown, or a kernel whose per-CTA stream rate the heuristic
// was not measured on; a streaming decode then aims at half the SMs): its
// unsplit (base) tile space, planned once here for the split kernel (pad_first_ok: it stores O from
// registers) and handed to the cluster rule and the schedule, and its split count: `requested`
// when > 0 (the caller's num_splits, honoured even past the key blocks: those splits see no key),
// else the heuristic (api/split_heuristic.h) from the base tile count, the key blocks of the
// longest sequence (seqlen_k: the max bound when varlen) and the SM count; the launch streams K/V
// when it has one tile per (batch, KV head). Where the caller says its splits may merge in clusters
// (`cluster_merge`: the config and the switch allow it; the rule was measured there only, at d 128),
// a streaming decode then takes 1.5 x the heuristic's splits where that count is even, fits one
// cluster and leaves each split >= kLongSplitBlocks key blocks (wider_streaming_split).
struct SplitPlan {
  int splits = 1;
  TileSpace base;
};

inline SplitPlan plan_splits(int requested, const AttnParams& a, MaskClass mask, const GqaPack& pack, int tile_rows,
                             int block_n, int sms, double hbm_bytes_per_s, bool cluster_merge) {
  SplitPlan p;
  p.base = plan_tile_space(a, mask, pack, tile_rows, true);
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
  p.splits = std::max(1, int(detail::choose_num_splits(shape)));
  if (cluster_merge && shape.streams_kv)
    p.splits = wider_streaming_split(p.splits, shape.key_blocks, pack, a.seqlen_q, shape.tiles, sms);
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
