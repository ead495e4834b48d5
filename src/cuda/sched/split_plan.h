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

// Splits of a launch on `tile_rows` x `block_n` tiles over `sms` multiprocessors: `requested` when
// > 0 (the caller's num_splits, honoured even past the key blocks: those splits see no key), else
// the heuristic (api/split_heuristic.h) from the unsplit launch's tile count, the key blocks of the
// longest sequence (seqlen_k: the max bound when varlen) and the SM count; the launch streams K/V
// when it has one tile per (batch, KV head).
inline int plan_num_splits(int requested, const AttnParams& a, MaskClass mask, const GqaPack& pack, int tile_rows,
                           int block_n, int sms) {
  if (requested > 0) return requested;
  TileSchedule s;
  const int64_t tiles = plan_tile_space(a, mask, pack, tile_rows, true, s);
  detail::SplitShape shape;
  shape.tiles = tiles;
  shape.key_blocks = (int64_t(a.seqlen_k) + block_n - 1) / block_n;
  shape.sms = sms;
  shape.streams_kv = tiles == int64_t(a.batch) * a.heads_kv;
  return std::max(1, int(detail::choose_num_splits(shape)));
}

// Rows of one split's partials: every (batch, q head, query token), in the combine's order.
inline int64_t split_rows(const AttnParams& a, int64_t total_q) {
  return a.cu_seqlens_q != nullptr ? int64_t(a.heads_q) * total_q : int64_t(a.batch) * a.heads_q * a.seqlen_q;
}

// Where a split launch's partials are merged: by the combine kernel that follows it, or by the
// split kernel itself, the last CTA of each tile to store its partials (the combine in the kernel:
// no second launch, no wait for the split grid to end). Auto takes the kernel's own combine where
// - the persistent grid holds every split tile at once (tiles x splits <= CTAs): a merge then ends
//   its CTA's work instead of delaying the CTA's next tile;
// - and a tile stores few rows (tile_rows_stored <= kMaxRowsMergedInKernel): the merging CTA's
//   consumer warps (8 on the 128-row tiles) take the rows in turn, each row ~1-2 dependent L2
//   round trips, where the combine kernel gives every row its own warp: at 16 rows a warp merges
//   2. Decode (s_q 1, GQA: one row per q head of the tile) is the case it is for.
// Else the combine kernel.
enum class SplitCombine { Auto, Kernel, InKernel };

constexpr int kMaxRowsMergedInKernel = 16;

// Rows a tile stores at most: a GQA-packed tile (pack_heads > 0) seqlen_q rows of each of its
// pack_heads heads, else seqlen_q rows (varlen: the longest sequence's) up to the tile's rows.
inline int tile_rows_stored(int pack_heads, int seqlen_q, int tile_rows) {
  return pack_heads > 0 ? pack_heads * seqlen_q : (seqlen_q < tile_rows ? seqlen_q : tile_rows);
}

inline bool combine_in_kernel(SplitCombine mode, int64_t split_tiles, int ctas, int rows_stored) {
  if (mode != SplitCombine::Auto) return mode == SplitCombine::InKernel;
  return split_tiles <= ctas && rows_stored <= kMaxRowsMergedInKernel;
}

// Arrival flags of the combine in the kernel: one 32-bit word per (base tile, split).
inline int64_t split_arrival_words(int64_t base_tiles, int splits) { return base_tiles * splits; }

// The n-th call's arrival token: a signalling-NaN bit pattern (0x7F800001 ... 0x7FBFFFFF), which
// no fp32 partial (arithmetic gives the quiet NaN), LSE or key count in a reused workspace holds,
// and never 0 (a lowered flag).
inline uint32_t arrival_token(uint64_t n) { return 0x7F800001u + uint32_t(n % 0x3FFFFFu); }

// Bytes of the split workspace: fp32 partial O (splits, rows, d_v), then fp32 LSE (splits, rows),
// then `arrival_words` 32-bit arrival flags (0 without the combine in the kernel), each part
// 256-byte aligned.
inline int64_t split_workspace_bytes(int splits, int64_t rows, int dv, int64_t arrival_words = 0) {
  const int64_t o = (int64_t(splits) * rows * dv * 4 + 255) / 256 * 256;
  const int64_t lse = int64_t(splits) * rows * 4;
  if (arrival_words == 0) return o + lse;
  return o + (lse + 255) / 256 * 256 + arrival_words * 4;
}

}  // namespace fastattn::cuda_backend
