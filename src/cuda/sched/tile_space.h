// The tile space of a launch and its candidate order, from the problem and the kernel config's tile
// rows (host, no device query: the CPU tests run it). cuda/launch_plan.cpp then sizes the grid,
// chooses the L2 sections (which may drop the longest-first order) and the divisors.
#pragma once

#include <cstdint>

#include "cuda/common/attn_params.h"
#include "cuda/mask/mask_class.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::cuda_backend {

// Fills s's tile space (tile_rows, packing fields, m_blocks, head_slots, batch_heads, tiles) and
// its longest-first candidate (heavy_first, first_block_pad; section_slots = batch_heads).
// `pad_first_ok`: the kernel may put a sequence's padding rows in its first m-block (not with a
// TMA store of O). Returns the tile count; s.tiles is set only when it fits in an int.
inline int64_t plan_tile_space(const AttnParams& a, MaskClass mask, const GqaPack& pack, int tile_rows,
                               bool pad_first_ok, TileSchedule& s) {
  s = TileSchedule{};
  s.tile_rows = tile_rows;
  if (pack.rows > 0) {
    int shift = 0;
    while ((1 << shift) < pack.rows) ++shift;
    s.pack_rows = pack.rows;
    s.pack_heads = pack.heads;
    s.row_pos_mask = pack.rows - 1;
    s.row_head_shift = shift;
    s.row8_step = pack.rows >= 16 ? 8 : 0;
    s.m_blocks = 1;
    s.head_slots = a.heads_kv * pack.groups;
  } else {
    s.m_blocks = (a.seqlen_q + tile_rows - 1) / tile_rows;
    s.head_slots = a.heads_q;
  }
  const int64_t tiles = int64_t(s.m_blocks) * s.head_slots * a.batch;
  if (tiles > INT32_MAX) return tiles;
  s.batch_heads = s.head_slots * a.batch;
  s.tiles = int(tiles);
  s.section_slots = s.batch_heads;
  // Longest first (sched/tile_order.cuh; packed tiles are all one m-block): causal, where a tile's
  // work grows with its m-block; and unmasked fixed-length launches whose partial m-block leaves a
  // 64-row warpgroup without rows (the kernel skips its GEMMs: that tile is the lightest, d = 64's
  // 192-row tiles at s = 1024 or 4096), whose padding rows must then go to the first m-block, which
  // the order visits last in its section. Local windows gain nothing (equal key counts per m-block).
  const bool varlen = a.cu_seqlens_q != nullptr;
  const int pad = s.m_blocks * tile_rows - a.seqlen_q;  // fixed length
  const bool light_first = mask == MaskClass::None && !varlen && pad >= 64 && pad_first_ok;
  s.heavy_first = pack.rows == 0 && (mask == MaskClass::Causal || light_first);
  s.first_block_pad = s.heavy_first && pad_first_ok ? (varlen ? -1 : pad) : 0;
  return tiles;
}

// A tile space planned once and handed on (the split launch: its split count, cluster rule and
// schedule all start from it): plan_tile_space's fields (plan_splits clears the order of a space of
// one m-block: split_plan.h), its count and the flag it was planned with.
struct TileSpace {
  TileSchedule s;
  int64_t tiles = 0;  // may exceed an int (s.tiles is then 0): plan_schedule refuses it
  bool pad_first_ok = true;
};

inline TileSpace plan_tile_space(const AttnParams& a, MaskClass mask, const GqaPack& pack, int tile_rows,
                                 bool pad_first_ok) {
  TileSpace t;
  t.pad_first_ok = pad_first_ok;
  t.tiles = plan_tile_space(a, mask, pack, tile_rows, pad_first_ok, t.s);
  return t;
}

}  // namespace fastattn::cuda_backend
