// The element-bitmask forward's per-launch prep (BitmaskConfig kernels): from the caller's bits and the
// launch's schedule, before the attention kernel, on its stream (graph-capturable), two launches:
//   1. per block of a mask line (mask batch, mask head, q tile of 128 rows) x key block of 128: its
//      class (mask/bit_order.h: empty, full, partial) from its 128 x 128 bits, and for a partial block
//      its bits gathered in accumulator order into its packed slot (128 rows x 4 words, 2 KB);
//   2. per schedule tile: its own list of kept key blocks inside its window range, ordered
//      [partial below the window's full range][full in both][partial above], each entry
//      block * 2 + (bits to apply), and its header (BlockList positions) and line (first slot).
// Bits outside the mask's cover (rows past min(rows, longest seqlen_q), keys past min(32 * words,
// longest seqlen_k)) do not count: the window masks those pairs anyway.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/sm90/fwd/block_lists.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {

constexpr int kBitSlotWords = 128 * 4;  // a block's packed bits: 128 rows x 4 quad threads

struct BitListPrep {
  FwdParams p;                     // attn and sched as the kernel gets them
  const uint32_t* mask = nullptr;  // the caller's words
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;  // in words; 0: broadcast
  int head_div = 1;                // q heads per mask head
  int mask_batches = 1, mask_heads = 1;
  int q_tiles = 0;                 // ceil(row cover / 128)
  int row_cover = 0, key_cover = 0;
  int n_blocks = 0;                // key blocks of 128 of the longest sequence
  // The workspace (fwd/params.h: the kernel finds the slots and lines from the headers): packed slots
  // (lines x n_blocks, slot s at bit_slot), headers (p.sched.tiles), tile lines (p.sched.tiles), list
  // (p.sched.tiles x n_blocks), classes (lines x n_blocks bytes).
  int4* headers = nullptr;
  int* list = nullptr;
  uint8_t* classes = nullptr;
};

FASTATTN_HD int64_t bit_lines(const BitListPrep& b) { return int64_t(b.mask_batches) * b.mask_heads * b.q_tiles; }

// Writes packed, classes, then headers, tile_lines and list on `stream` (two launches; nothing when
// there are no tiles).
Status build_bit_lists(const BitListPrep& b, cudaStream_t stream);

}  // namespace fastattn::sm90
