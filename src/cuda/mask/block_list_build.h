// How a block-sparse tile's BlockList (mask/block_source.cuh) is made from its window range and its
// mask row's kept blocks: the list builder's arithmetic (sm90/block_lists.cu), in a header of its own
// so that the CPU tests check it (tests/cpu/block_source_test.cpp) and the kernels that include
// block_source.cuh do not see it.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/mask/bit_order.h"
#include "cuda/mask/block_source.cuh"

namespace fastattn::cuda_backend {

// The four block indices whose kept-block counts make a BlockList of range r (the list builder,
// sm90/block_lists.cu): begin, end, and the full range clipped into [begin, end] (the walk compares
// positions with it only there, and clipped it keeps its order, so an empty full range stays empty).
FASTATTN_HD void block_list_edges(const BlockRange& r, int (&edge)[4]) {
  edge[0] = r.begin;
  edge[1] = r.end;
  edge[2] = imin(imax(r.full_begin, r.begin), r.end);
  edge[3] = imin(imax(r.full_end, r.begin), r.end);
}

// The deterministic bitmask backward's list (sm90/bit_lists.cu): edge[2] (the full range's first block)
// moved up to the first block in the full range that the bits keep whole (edge[3] where none), so that
// bit-partial blocks below it go to part 0 (bit_list_part) rather than after the full ones: the list then
// rises from the key tile's first kept q-block as the dense walk does. The dQ turns run from the top key
// tile down, and under a causal triangle spelled as bits key tile j's diagonal blocks are partial: listed
// last, its first full q-block's turn waited for tile j + 1's last steps, a chain through every key tile of
// a head (60.5 ms against the dense deterministic 10.3 at b4 s8192 h32 d128; docs/notes/masks-sm90.md).
// Blocks below it are outside the bits' full run only, so the window mask they get there is the window's
// own (all kept inside its full range): the verdicts do not change, only the positions.
FASTATTN_HD void bit_list_det_edges(const uint8_t* cls, int (&edge)[4]) {
  int n = edge[2];
  while (n < edge[3] && cls[n] != kBitsFull) ++n;
  edge[2] = n;
}

// The BlockList of a row whose kept blocks start at position `base` of `list`, from the counts of
// kept blocks below each of block_list_edges' four edges.
FASTATTN_HD BlockList block_list_at(const int* list, int base, const int (&below)[4]) {
  BlockList l;
  l.begin = base + below[0];
  l.end = base + below[1];
  l.full_begin = base + below[2];
  l.full_end = base + below[3];
  l.list = list;
  return l;
}

}  // namespace fastattn::cuda_backend
