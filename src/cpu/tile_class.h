// Tile activity for the CPU backend, derived from the mask oracle's per-row key ranges and, with a
// block-sparse mask, its blocks (with an element bitmask, its bits): Empty tiles are skipped, Full tiles run unmasked, only Partial
// tiles apply the mask.
#pragma once

#include <algorithm>
#include <cstdint>

#include "reference/mask_oracle.h"

namespace fastattn::cpu {

enum class TileClass { Empty, Full, Partial };

// Rows [i0, i1) x keys [j0, j1) of one sequence. Exact: looks at every row's range (a tile
// has <= 64 rows, cheap next to its 64 x 64 x d products).
inline TileClass classify_tile(const reference::MaskRule& m, int64_t i0, int64_t i1, int64_t j0,
                               int64_t j1) {
  bool any = false, all = true;
  for (int64_t i = i0; i < i1; ++i) {
    const reference::KeyRange r = reference::key_range(m, i);
    const bool touches = !r.empty() && r.begin < j1 && r.end > j0;
    any = any || touches;
    all = all && r.begin <= j0 && r.end >= j1 && !r.empty();
  }
  if (!any) return TileClass::Empty;
  return all ? TileClass::Full : TileClass::Partial;
}

// A block mask's verdict on a tile the window alone classes `window` (Full or Partial), exact:
// Empty when no window-kept pair lies in a kept block, Full when the window keeps every pair and
// every block the tile touches is kept, else Partial. Reads only entries of window-kept pairs (rows
// past len_q keep none), so nothing outside the mask's validated extent.
inline TileClass classify_blocks(const reference::HeadMask& m, TileClass window, int64_t i0, int64_t i1,
                                 int64_t j0, int64_t j1) {
  const detail::BlockMaskView& v = *m.blocks;
  bool any = false, all = window == TileClass::Full;
  int64_t done_qb = -1;  // with a Full window every row of one block row has one verdict
  for (int64_t i = i0; i < i1 && !(any && !all); ++i) {
    const int64_t qb = i / v.block_q;
    if (window == TileClass::Full && qb == done_qb) continue;
    done_qb = qb;
    const reference::KeyRange r = reference::key_range(m.rule, i);
    const int64_t lo = std::max(r.begin, j0), hi = std::min(r.end, j1);
    if (lo >= hi) continue;
    const uint8_t* row = v.at(m.b, m.h, qb, 0);
    const int64_t kb_lo = lo / v.block_k, kb_hi = (hi - 1) / v.block_k;  // blocks of this row's kept keys
    for (int64_t kb = kb_lo; kb <= kb_hi; ++kb) {
      const bool kept = row[kb * v.col_stride] != 0;
      any = any || kept;
      all = all && kept;  // with a Full window [lo, hi) is the whole tile
      if (any && !all) break;
    }
  }
  if (!any) return TileClass::Empty;
  return all ? TileClass::Full : TileClass::Partial;
}

// An element bitmask's verdict on a tile the window alone classes `window` (Full or Partial), exact:
// Empty when no window-kept pair has its bit set, Full when the window keeps every pair and every bit
// is set, else Partial. Reads the words of window-kept pairs only (each row's kept keys, a word at a
// time), so nothing outside the mask's validated extent.
inline TileClass classify_bits(const reference::HeadMask& m, TileClass window, int64_t i0, int64_t i1, int64_t j0,
                               int64_t j1) {
  const detail::BitMaskView& v = *m.bits;
  bool any = false, all = window == TileClass::Full;
  for (int64_t i = i0; i < i1 && !(any && !all); ++i) {
    const reference::KeyRange r = reference::key_range(m.rule, i);
    const int64_t lo = std::max(r.begin, j0), hi = std::min(r.end, j1);
    if (lo >= hi) continue;
    const uint32_t* row = v.row(m.b, m.h, i);
    for (int64_t w = lo / 32; w <= (hi - 1) / 32; ++w) {  // the word's bits of keys [lo, hi)
      const int64_t a = std::max(lo, 32 * w) - 32 * w, e = std::min(hi, 32 * w + 32) - 32 * w;
      const uint32_t want = (e == 32 ? 0xffffffffu : (1u << e) - 1u) & ~((1u << a) - 1u);
      const uint32_t got = row[w] & want;
      any = any || got != 0;
      all = all && got == want;
    }
  }
  if (!any) return TileClass::Empty;
  return all ? TileClass::Full : TileClass::Partial;
}

// The tile's class under the whole mask of one head (window, and blocks or bits).
inline TileClass classify_tile(const reference::HeadMask& m, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const TileClass window = classify_tile(m.rule, i0, i1, j0, j1);
  if (window == TileClass::Empty) return window;
  if (m.bits != nullptr) return classify_bits(m, window, i0, i1, j0, j1);
  if (m.blocks == nullptr) return window;
  return classify_blocks(m, window, i0, i1, j0, j1);
}

// Hull of the keys kept by any row of [i0, i1): tiles outside it are Empty.
inline reference::KeyRange block_key_range(const reference::MaskRule& m, int64_t i0, int64_t i1) {
  reference::KeyRange hull{INT64_MAX, INT64_MIN};
  for (int64_t i = i0; i < i1; ++i) {
    const reference::KeyRange r = reference::key_range(m, i);
    if (r.empty()) continue;
    hull.begin = std::min(hull.begin, r.begin);
    hull.end = std::max(hull.end, r.end);
  }
  return hull.empty() ? reference::KeyRange{0, 0} : hull;
}

}  // namespace fastattn::cpu
