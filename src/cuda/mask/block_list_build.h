// How a block-sparse tile's BlockList (mask/block_source.cuh) is made from its window range and its
// mask row's kept blocks: the list builder's arithmetic (sm90/block_lists.cu), in a header of its own
// so that the CPU tests check it (tests/cpu/block_source_test.cpp) and the kernels that include
// block_source.cuh do not see it.
#pragma once

#include "cuda/common/host_device.h"
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
