// The split-D forward's grid and split count (host, no device query: the CPU tests run it). Its
// tiles are 64 query rows x a pair of 256-column slices of d_v (sm90/fwd_splitd/config.h), so its
// GQA packing, tile count and split plan differ from the 128-row forward's (split_plan.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/split_heuristic.h"
#include "cuda/common/attn_params.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sm90/fwd_splitd/config.h"

namespace fastattn::cuda_backend {

// The unsplit grid: (m-blocks x pairs, head slots, batch). Packed (decode, s_q <= 32, GQA): one
// m-block, head slots = KV heads x groups (each slot a tile of pack.heads q heads); else
// m-blocks of 64 rows and one slot per q head.
struct SplitDGrid {
  GqaPack pack;
  int m_blocks = 0;
  int pairs = 0;
  int head_slots = 0;
  int64_t tiles = 0;  // CTAs of the unsplit launch
};

inline SplitDGrid splitd_grid(const AttnParams& a, int dv, bool varlen) {
  using Cfg = sm90::SplitDConfig;
  SplitDGrid g;
  g.pack = choose_gqa_pack(a.q_per_kv, a.seqlen_q, varlen, Cfg::kRows);
  g.pairs = (dv / 64 + Cfg::kPairAtoms - 1) / Cfg::kPairAtoms;
  g.m_blocks = g.pack.rows > 0 ? 1 : (a.seqlen_q + Cfg::kRows - 1) / Cfg::kRows;  // varlen: max_seqlen_q
  g.head_slots = g.pack.rows > 0 ? a.heads_kv * g.pack.groups : a.heads_q;
  g.tiles = int64_t(g.m_blocks) * g.pairs * g.head_slots * a.batch;
  return g;
}

// Splits of each tile's keys: `requested` when > 0 (the caller's num_splits, honoured past the key
// blocks: those splits see no key), else the shared heuristic (api/split_heuristic.h) on this grid's
// tile count and 128-key blocks. Not its streaming (decode) rule, which aims at half the SMs for
// HBM: an MLA decode tile (128 q heads over one KV head, d 576 / 512) does 128 FLOP per K/V byte,
// near the kernel's own balance point (~50 % of the tensor peak over 3.35 TB/s: ~150), so it wants
// every SM: the wave-filling rule.
inline int splitd_splits(int requested, const SplitDGrid& g, const AttnParams& a, int sms) {
  if (requested > 0) return requested;
  detail::SplitShape shape;
  shape.tiles = g.tiles;
  shape.key_blocks = (int64_t(a.seqlen_k) + sm90::SplitDConfig::kKeys - 1) / sm90::SplitDConfig::kKeys;
  shape.sms = sms;
  shape.streams_kv = false;
  return std::max(1, int(detail::choose_num_splits(shape)));
}

}  // namespace fastattn::cuda_backend
