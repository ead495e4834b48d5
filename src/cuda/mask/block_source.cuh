// The blocks one tile visits, and in which order: the one walk that the producer (loads), the
// consumers (GEMMs, masks, the plain loop body) and an idle warpgroup (turns without work) all
// follow, so they cannot disagree on how many blocks a tile has.
//
// Row view (forward): the key blocks of a query tile, from the window mask. Column view
// (backward): the query blocks of a key tile, from the rows that keep each key. Both are an
// interval of blocks with an inner interval of full ones (every pair kept: no mask), walked from
// the last block down: the partial blocks at the top come first, so their masking overlaps the
// full blocks' loads (forward).
//
// The walk runs over positions `it`: first(), then next(it) while !done(it); block(it) is the
// block index at that position. Here a position is the block itself; a block-sparse source
// (BlockList: a per-tile list of blocks) keeps the same walk with a position into its list.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/mask/window_mask.cuh"

namespace fastattn::cuda_backend {

// No default member initializers: a kernel's tile records (FwdTile) are declared ahead of their
// first tile, and zeroing them there costs instructions at every run of blocks.
struct BlockRange {
  int begin, end;            // blocks [begin, end) hold a kept pair; none when end <= begin
  int full_begin, full_end;  // blocks [full_begin, full_end) are kept whole

  FASTATTN_HD bool empty() const { return end <= begin; }
  FASTATTN_HD int count() const { return end - begin; }

  // The walk, last block first.
  FASTATTN_HD int first() const { return end - 1; }
  FASTATTN_HD int next(int it) const { return it - 1; }
  FASTATTN_HD bool done(int it) const { return it < begin; }
  FASTATTN_HD bool has_next(int it) const { return it > begin; }  // it is not the walk's last
  FASTATTN_HD int last() const { return begin; }
  FASTATTN_HD bool is_last(int it) const { return it == begin; }
  FASTATTN_HD int block(int it) const { return it; }
  FASTATTN_HD bool full(int it) const { return it >= full_begin && it < full_end; }
  FASTATTN_HD bool above_full(int it) const { return it >= full_end; }  // partial, before the full ones

  // The lowest position from which on down to here every block is full, stopping above the
  // walk's last block when `keep_last` (it is run apart).
  FASTATTN_HD int full_run_end(bool keep_last) const { return imax(full_begin, begin + (keep_last ? 1 : 0)); }
};

// Block-sparse row view (a BlockSparseConfig kernel, sm90/fwd/block_lists.cuh): the same walk over
// positions into a list of kept key blocks, ascending. Positions [begin, end) of `list` hold the
// tile's kept blocks inside its window range, and [full_begin, full_end) the positions of those that
// are also full in the window: the window's full blocks are one interval of block indices, so the
// kept ones among them are one interval of positions, and every comparison the walk makes between a
// position and the full range (full, above_full, full_run_end) means what it means on blocks. The
// positions index the whole list array (each tile's header carries its list's offset), so block(it)
// is one load; everything else is BlockRange's.
struct BlockList : BlockRange {
  const int* list;

  FASTATTN_HD int block(int it) const {
#ifdef __CUDA_ARCH__
    return __ldg(list + it);
#else
    return list[it];
#endif
  }
};

// Element-bitmask row view (a BitmaskConfig kernel, sm90/fwd/bit_lists.h): a BlockList whose list is
// the tile's own (the prep kernel orders each tile's kept blocks: partial ones below the full range,
// the full ones, then the partial ones above), each entry block * 2 + whether the block's bits must be
// applied; `line` is the first packed-bits slot of the tile's mask line (its block n's slot: line + n).
struct BitList : BlockList {
  int line;

  FASTATTN_HD int entry(int it) const { return BlockList::block(it); }
  FASTATTN_HD int block(int it) const { return entry(it) >> 1; }
  FASTATTN_HD bool needs_bits(int it) const { return entry(it) & 1; }
};

// Row view: the key blocks of `tile_n` keys that query rows [m0, m1) see (m0 < m1).
FASTATTN_HD BlockRange key_blocks(const WindowMask& mask, int m0, int m1, int tile_n) {
  BlockRange r{};
  mask.tile_range(m0, m1, tile_n, r.begin, r.end);
  mask.full_range(m0, m1, tile_n, r.full_begin, r.full_end);
  return r;
}

// Split-KV: share `split` of `splits` of r's blocks, a contiguous run of count() * split / splits
// to count() * (split + 1) / splits (shares differ by at most one block; a share may be empty when
// there are more splits than blocks). The full range stays absolute, so the mask is unchanged.
FASTATTN_HD BlockRange split_share(BlockRange r, int split, int splits) {
  if (r.empty()) return r;
  const int64_t n = r.count();
  const int lo = r.begin + int(n * split / splits), hi = r.begin + int(n * (split + 1) / splits);
  r.begin = lo;
  r.end = hi;
  return r;
}

// Column view: the query blocks of `tile_m` rows that see key tile [n0, n1) (n0 < n1), of which
// only the keys below mask.len_k are present (a sequence's last tile may run past it). `Mask`
// gives the rows that keep key j as [row_lo(j), row_hi(j)), both non-decreasing in j below len_k
// (a window's column is an interval too): the visible blocks run from key n0's first row to the
// last present key's last row. A block is full when its rows keep n1 - 1 (the latest first row)
// and n0 (the earliest last row), and never when the tile runs past len_k: those keys are masked.
template <class Mask>
FASTATTN_HD BlockRange query_blocks(const Mask& mask, int n0, int n1, int tile_m) {
  BlockRange r{};
  const int last = imin(n1, mask.len_k) - 1;
  if (last < n0) return r;  // no key present: empty
  r.begin = mask.row_lo(n0) / tile_m;
  r.end = (mask.row_hi(last) + tile_m - 1) / tile_m;
  if (n1 <= mask.len_k) {
    r.full_begin = (mask.row_lo(n1 - 1) + tile_m - 1) / tile_m;
    r.full_end = mask.row_hi(n0) / tile_m;  // negative only below full_begin (>= 0): empty
  }
  return r;
}

}  // namespace fastattn::cuda_backend
