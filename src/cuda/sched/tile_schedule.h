// The schedule of a persistent launch: its tile space (m-blocks x head slots x batch, or GQA-packed
// tiles), the order the CTAs walk it in (longest first, L2 sections) and the divisors the kernel
// derives tile coordinates with. Filled once per launch by plan_schedule (cuda/launch_plan.h),
// after the kernel config is chosen; read by sched/tile_order.cuh and the kernels.
// Field order is the kernels' parameter-bank layout: keep it.
#pragma once

#include "cuda/common/fast_div.h"

namespace fastattn::cuda_backend {

// The divisors of the tile order (sched/tile_order.cuh), from the fields below (tile_divisors).
struct TileDivisors {
  FastDiv m_blocks, head_slots, heads_kv;
  FastDiv section_tiles, section_slots, last_section_slots;  // longest first: a section's tiles and width
};

struct TileSchedule {
  int tile_rows = 128;        // query rows per tile: the kernel config's block rows
  int m_blocks = 0;           // q tiles per (batch, head slot) over seqlen_q
  int head_slots = 0;         // head slots per batch: heads_q, or heads_kv * groups when packed
  int batch_heads = 0;        // batch * head_slots
  int tiles = 0;              // m_blocks * batch_heads: the persistent grid's work list

  // GQA head packing (sched/gqa_pack.h): a tile holds pack_heads q heads of one KV head, pack_rows
  // rows each. Row r of a tile is q head `head + (r >> row_head_shift)` at query position
  // `m0 + (r & row_pos_mask)`; unpacked these reduce to head + 0 and m0 + r (r < 256: 128- and
  // 192-row tiles).
  int pack_rows = 0;          // R (a power of two >= seqlen_q); 0 = off
  int pack_heads = 1;         // G: q heads per tile, heads of a slot: kv * q_per_kv + group * G + g
  int row_pos_mask = 255;     // R - 1 when packed
  int row_head_shift = 8;     // log2(R) when packed
  int row8_step = 8;          // position of a thread's second row (tile row + 8) minus its first's:
                              // 0 when R <= 8 (row + 8 is another head at the same position)
  int heavy_first = 0;        // visit tiles longest first (causal, or unmasked with an idle warpgroup's
                              // worth of padding); see sched/tile_order.cuh and cuda/launch_plan.cpp
  // The padding rows of every sequence (rows_q not a multiple of tile_rows) go to its first
  // m-block, or -1: each sequence's own, (tile_rows - rows_q % tile_rows) % tile_rows (varlen);
  // 0 = none (they go to the last). Longest first only: causal, the first m-block sees the fewest
  // keys and the padding shortens the heaviest; unmasked, its idle warpgroups make it the light
  // tile that the order runs last. Off with a TMA store of O: a store box starting above row 0 is
  // an illegal instruction.
  int first_block_pad = 0;
  int section_slots = 1;      // heavy_first: (batch, head) slots per L2 section (sched/l2_sections.h)
  TileDivisors div;           // the kernel's tile-order divisors
};

// The divisors tile_coord uses, from s's tile space and section width and the KV head count.
// Host callers (the schedule simulation, tests) derive them afresh from the fields.
inline TileDivisors tile_divisors(const TileSchedule& s, int heads_kv) {
  TileDivisors d;
  d.m_blocks = FastDiv(unsigned(s.m_blocks));
  d.head_slots = FastDiv(unsigned(s.head_slots));
  d.heads_kv = FastDiv(unsigned(heads_kv));
  const unsigned width = unsigned(s.section_slots < 1 ? 1 : s.section_slots), all = unsigned(s.batch_heads);
  d.section_tiles = FastDiv(width * unsigned(s.m_blocks));
  d.section_slots = FastDiv(width);
  d.last_section_slots = FastDiv(all == 0 ? 1 : all - (all - 1) / width * width);
  return d;
}

}  // namespace fastattn::cuda_backend
