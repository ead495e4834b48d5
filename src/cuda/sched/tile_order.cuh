// The order in which a persistent forward kernel visits its (batch, head slot, m-block) tiles: a static
// schedule over one linear order, which the producer and consumer warps of a CTA derive alike
// without talking. Round r hands tiles [r G, (r + 1) G) to the G CTAs, in alternating direction.
// The order arithmetic is plain C++ (host and device): the host simulates the schedule to choose
// the causal section width (sched/causal_sections.h), and the CPU tests check it.
#pragma once

#include "cuda/common/fwd_params.h"

#ifdef __CUDACC__
#define FASTATTN_HD __host__ __device__ __forceinline__
#else
#define FASTATTN_HD inline
#endif

namespace fastattn::cuda_backend {

struct TileCoord {
  int batch, head, kv_head, m_block;  // head: the slot's first q head (packed: of pack_heads)
};

FASTATTN_HD unsigned min_u(unsigned a, unsigned b) { return a < b ? a : b; }

// The tile of (batch, head slot) `batch_slot` and m-block `m_block`. Slots cycle through the KV
// heads first (GQA), so the CTAs running at once read several KV heads' K/V instead of all
// hammering one KV head's lines in the same L2 slices, while each KV head's q heads still follow
// within a few rounds (its K/V stays in L2). A slot is one q head, or with GQA packing a group of
// p.pack_heads q heads of one KV head (sched/gqa_pack.h).
FASTATTN_HD TileCoord slot_tile(const FwdParams& p, unsigned batch_slot, unsigned m_block) {
  const unsigned heads = unsigned(p.head_slots), kv_heads = unsigned(p.heads_kv);
  const unsigned slot = batch_slot % heads, kv = slot % kv_heads;
  return {int(batch_slot / heads), int(kv * unsigned(p.q_per_kv) + slot / kv_heads * unsigned(p.pack_heads)), int(kv),
          int(m_block)};
}

FASTATTN_HD TileCoord tile_coord(const FwdParams& p, int tile) {
  // Unsigned division, operands straight from the parameter bank: nothing here stays live across
  // a tile (at d = 256 the consumer has no register to spare).
  const unsigned id = unsigned(tile), m_blocks = unsigned(p.m_blocks);
  if (p.heavy_first) {
    // Causal: a tile's work grows with its m-block. Within a section of `section_slots`
    // (batch, head) slots the m-block is outermost, highest first, so each round holds like-sized
    // tiles and the longest run first (LPT); the sections follow one another, so the K/V that the
    // CTAs read at once is a section's, which fits in L2 (one section of all slots is plain LPT).
    const unsigned width = unsigned(p.section_slots), per_section = width * m_blocks;
    const unsigned section = id / per_section, first = section * width, w = id - section * per_section;
    const unsigned n = min_u(width, unsigned(p.batch_heads) - first);  // the last may be narrower
    return slot_tile(p, first + w % n, m_blocks - 1 - w / n);
  }
  // Tiles of equal work: m-block innermost, so the CTAs running at once share few heads' K/V and
  // L2 serves most K/V reads.
  return slot_tile(p, id / m_blocks, m_blocks - 1 - id % m_blocks);
}

// The tile of CTA `cta` (of `ctas`) in round `round`. Rounds alternate direction: with tiles sorted
// longest first, the CTA that took a round's longest tile takes the next round's shortest. (Plain
// striding gave CTA 0 the longest tile of every round: causal d=128 s=8k lost ~5%, H200 2026-11-21.)
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
