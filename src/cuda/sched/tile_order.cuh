// The order in which a persistent forward kernel visits its (batch, head slot, m-block) tiles: a static
// schedule over one linear order, which the producer and consumer warps of a CTA derive alike
// without talking. Round r hands tiles [r G, (r + 1) G) to the G CTAs, in alternating direction.
// The order arithmetic is plain C++ (host and device): the host simulates the schedule to choose
// the L2 section width (sched/l2_sections.h), and the CPU tests check it.
#pragma once

#include "cuda/common/attn_params.h"
#include "cuda/common/host_device.h"
#include "cuda/sched/tile_schedule.h"


namespace fastattn::cuda_backend {

struct TileCoord {
  int batch, head, kv_head, m_block;  // head: the slot's first q head (packed: of pack_heads)
};

// The tile of (batch, head slot) `batch_slot` and m-block `m_block`. Slots cycle through the KV
// heads first (GQA), so the CTAs running at once read several KV heads' K/V instead of all
// hammering one KV head's lines in the same L2 slices, while each KV head's q heads still follow
// within a few rounds (its K/V stays in L2). A slot is one q head, or with GQA packing a group of
// s.pack_heads q heads of one KV head (sched/gqa_pack.h).
FASTATTN_HD TileCoord slot_tile(const TileSchedule& s, const TileDivisors& div, const AttnParams& a,
                                unsigned batch_slot, unsigned m_block) {
  const unsigned batch = div.head_slots.div(batch_slot), slot = batch_slot - batch * div.head_slots.d;
  const unsigned group = div.heads_kv.div(slot), kv = slot - group * div.heads_kv.d;
  return {int(batch), int(kv * unsigned(a.q_per_kv) + group * unsigned(s.pack_heads)), int(kv), int(m_block)};
}

// Divisions by multiply-high (common/fast_div.h) with divisors from `div` (the parameter bank in
// the kernel): nothing here stays live across a tile (at d = 256 the consumer has no register to
// spare), and plain divisions cost 171 uniform instructions per tile boundary.
FASTATTN_HD TileCoord tile_coord(const TileSchedule& s, const TileDivisors& div, const AttnParams& a, int tile) {
  const unsigned id = unsigned(tile), m_blocks = div.m_blocks.d;
  if (s.heavy_first) {
    // Causal: a tile's work grows with its m-block (unmasked heavy_first: all are equal but the
    // first, whose padding leaves a warpgroup idle, so it comes last alike). Within a section of
    // `section_slots` (batch, head) slots the m-block is outermost, highest first, so each round
    // holds like-sized tiles and the longest run first (LPT); the sections follow one another, so
    // the K/V that the CTAs read at once is a section's, which fits in L2 (one section of all slots
    // is plain LPT).
    const unsigned section = div.section_tiles.div(id), width = div.section_slots.d;
    const unsigned first = section * width, w = id - section * div.section_tiles.d;
    // The last section may be narrower.
    const FastDiv& n = first + width <= unsigned(s.batch_heads) ? div.section_slots : div.last_section_slots;
    const unsigned row = n.div(w);
    return slot_tile(s, div, a, first + (w - row * n.d), m_blocks - 1 - row);
  }
  // Tiles of equal work: m-block innermost, so the CTAs running at once share few heads' K/V and
  // L2 serves most K/V reads.
  const unsigned slot = div.m_blocks.div(id);
  return slot_tile(s, div, a, slot, m_blocks - 1 - (id - slot * m_blocks));
}

// The tile of CTA `cta` (of `ctas`) in round `round`. Rounds alternate direction: with tiles sorted
// longest first, the CTA that took a round's longest tile takes the next round's shortest. (Plain
// striding gave CTA 0 the longest tile of every round: causal d=128 s=8k lost ~5%.)
FASTATTN_HD int tile_of_round(int round, int cta, int ctas) {
  return round * ctas + ((round & 1) ? ctas - 1 - cta : cta);
}

#ifdef __CUDACC__
// This CTA's index and the grid size, read afresh at each use (volatile): kept across a tile in
// registers, they pushed the d = 256 consumer over its 240-register budget (a 4-byte spill).
__device__ __forceinline__ int cta_index() {
  int v;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int cta_count() {
  int v;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(v));
  return v;
}
#endif

}  // namespace fastattn::cuda_backend
