// The biased forward's walk with the batch innermost, for a bias that every batch entry shares
// (stride 0 over the batch): the CTAs that run the same (head slot, m-block) tile of different batch
// entries run side by side, so their reads of that tile's bias rows meet in L2 (the default order,
// tile_order.cuh, puts the batch outermost: each entry streamed the head's bias from HBM again).
// A permutation of the tile ids, not a new order: position x of the walk runs the tile that the
// default order numbers batch_inner_tile(x), so tile_coord, a block-sparse tile's header and the
// host's balance simulation (which looks only at each position's m-block) stay as they are.
// Plain C++ (host and device): the CPU tests check that it permutes every schedule.
#pragma once

#include "cuda/common/fast_div.h"
#include "cuda/common/host_device.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::cuda_backend {

// The default order's id of the tile at position x when the batch (`batch`, its count; identity
// when batch.d is 1) goes innermost.
//   Tiles of equal work (m-block innermost by default): x = ((slot * m_blocks) + m-order) * batch + b,
//     so the batch entries of one (head slot, m-block) follow one another and a round of G CTAs holds
//     G / batch such tiles, each `batch` times.
//   Longest first (sections of section_slots (batch, head) slots, m-block outermost inside): the
//     slots of a section are counted head slot major, batch minor (q = slot * batch + b), so the batch
//     entries of one (head slot, m-block) sit next to each other in a round; a position keeps its
//     m-block (its row), so the rounds hold the same tile sizes as before. A head slot's entries may
//     straddle two sections where section_slots is not a multiple of the batch.
FASTATTN_HD int batch_inner_tile(const TileSchedule& s, const TileDivisors& div, const FastDiv& batch, int x) {
  const unsigned id = unsigned(x), nb = batch.d, slots = div.head_slots.d, m_blocks = div.m_blocks.d;
  if (s.heavy_first) {
    const unsigned width = div.section_slots.d, all = unsigned(s.batch_heads);
    const unsigned section = div.section_tiles.div(id), first = section * width, w = id - section * div.section_tiles.d;
    const FastDiv& n = first + width <= all ? div.section_slots : div.last_section_slots;
    const unsigned row = n.div(w), q = first + (w - row * n.d);
    const unsigned head_slot = batch.div(q), b = q - head_slot * nb;
    const unsigned slot = b * slots + head_slot;  // the default order's (batch, head) slot
    const unsigned home = div.section_slots.div(slot), home_first = home * width;
    const unsigned home_n = home_first + width <= all ? width : div.last_section_slots.d;
    return int(home * div.section_tiles.d + row * home_n + (slot - home_first));
  }
  const unsigned rest = batch.div(id), b = id - rest * nb;
  const unsigned head_slot = div.m_blocks.div(rest), m_order = rest - head_slot * m_blocks;
  return int((b * slots + head_slot) * m_blocks + m_order);
}

}  // namespace fastattn::cuda_backend
