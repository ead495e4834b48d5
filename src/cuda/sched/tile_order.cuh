// The order in which a persistent forward kernel visits its (batch, head, m-block) tiles. CTA c
// works tiles c, c + gridDim.x, c + 2 gridDim.x, ... of one linear order (a static schedule: the
// producer and consumer warps of a CTA derive the same tile sequence without talking).
#pragma once

#include "cuda/common/fwd_params.h"

namespace fastattn::cuda_backend {

struct TileCoord {
  int batch, head, m_block;
};

__device__ __forceinline__ TileCoord tile_coord(const FwdParams& p, int tile) {
  // Unsigned division, operands straight from the parameter bank: nothing here stays live across
  // a tile (at d = 256 the consumer has no register to spare).
  const unsigned id = unsigned(tile), heads = unsigned(p.heads_q), m_blocks = unsigned(p.m_blocks);
  if (p.heavy_first) {
    // Causal: a tile's work grows with its m-block. m-block outermost, highest first, so each
    // round of gridDim.x tiles holds like-sized tiles and the longest run first (LPT).
    const unsigned bh = unsigned(p.batch_heads), r = id % bh;
    return {int(r / heads), int(r % heads), int(m_blocks - 1 - id / bh)};
  }
  // Tiles of equal work: m-block innermost, so the CTAs running at once share few heads' K/V
  // (GQA: consecutive heads share a KV head) and L2 serves most K/V reads.
  const unsigned r = id / m_blocks;
  return {int(r / heads), int(r % heads), int(m_blocks - 1 - id % m_blocks)};
}

}  // namespace fastattn::cuda_backend
