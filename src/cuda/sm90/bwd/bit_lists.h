// The element-bitmask backward's per-launch prep (BitmaskBwdConfig kernels, config.h): from the caller's
// bits and the launch's key tiles, on the call's stream ahead of the preprocess, two launches:
//   1. per block (mask line, q-block) of a mask line (mask batch, mask head, key tile of block_n keys)
//      and a kernel q-block (block_m rows): its class (mask/bit_order.h: empty, full, partial) from its
//      block_m x block_n bits, and for a partial block its bits in S^T's accumulator order in its packed
//      slot (block_n key rows x 4 quad threads: key row r's word of quad thread t at r * 4 + t, bit
//      2j + e = query 8j + 2t + e of the block; bwd_quad_word below);
//   2. per key tile (batch, KV head, key block): its own list of non-empty q-blocks inside its window range
//      ([partial below the window's full range][full in both][partial above], bit_list_part), entries
//      q-block * 2 + (bits to apply), its header (BitList positions) and its line's first slot;
//   3. deterministic mode only: per (batch, KV head, q-block), the dQ turns of the key tiles that list it
//      (bwd_bit_dq_turn), a count from the top key tile down over the positions that launch 2 left
//      (per key tile and q-block, scratch after the lists: -1 where not listed).
// The workspace keeps BwdParams' layout (the block-sparse fields only): q_list_headers points at the
// headers (one int4 per key tile); after them one int per key tile, its line's first slot; before them
// the packed slots, slot s in the 2 KB below slot s - 1's; q_lists is the tiles' lists (n_tiles x m_blocks;
// deterministic mode: n_tiles x 2 m_blocks, each entry's dQ turn m_blocks after it, then the scratch).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "api/problem.h"
#include "cuda/common/bwd_params.h"
#include "cuda/common/host_device.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {

constexpr int kBwdBitSlotWords = 128 * 4;  // a block's packed bits: 128 key rows x 4 quad threads

FASTATTN_HD const int* bwd_bit_tile_lines(const int* q_list_headers, int64_t tiles) {
  return q_list_headers + 4 * tiles;
}
FASTATTN_HD const uint32_t* bwd_bit_slot(const int* q_list_headers, int64_t slot) {
  return reinterpret_cast<const uint32_t*>(q_list_headers) - (slot + 1) * kBwdBitSlotWords;
}

// Deterministic mode: beside each list entry (position pos, m_blocks further on: the rows are twice as wide
// then), the key tile's dQ turn in that q-block: how many key tiles above it (the same batch entry and KV
// head) list the q-block, i.e. the value of the q-block's semaphore when its adds may go (tile.cuh dq_turn;
// the window's tiles count the key blocks above that see it). Found from the step's position and a
// parameter alone, so that the dQ writer's 24 registers hold no offset for it.
FASTATTN_HD const int* bwd_bit_dq_turn(const int* q_lists, int pos, int m_blocks) { return q_lists + pos + m_blocks; }

// Sizes p's lists from problem's bits, allocates them stream-ordered (*ws: freed by the caller behind the
// kernel) and builds them on `stream`; sets p->q_list_headers and p->q_lists. The key tiles are block_n
// keys (128), the q-blocks block_m rows (64, or 128 at d 64).
Status prepare_bwd_bit_lists(const detail::Problem& problem, int block_m, int block_n, cudaStream_t stream,
                             cuda_backend::BwdParams* p, void** ws);

}  // namespace fastattn::sm90
