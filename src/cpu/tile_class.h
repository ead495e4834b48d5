// Tile activity for the CPU backend, derived from the mask oracle's per-row key ranges:
// Empty tiles are skipped, Full tiles run unmasked, only Partial tiles apply the mask.
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
