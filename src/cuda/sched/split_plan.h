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

// Bytes of the split workspace: fp32 partial O (splits, rows, d_v), then fp32 LSE (splits, rows),
// the LSE part 256-byte aligned.
inline int64_t split_workspace_bytes(int splits, int64_t rows, int dv) {
  const int64_t o = (int64_t(splits) * rows * dv * 4 + 255) / 256 * 256;
  return o + int64_t(splits) * rows * 4;
}

}  // namespace fastattn::cuda_backend
