// Tile shapes of the CPU backend and the masking of a Partial tile, shared by forward and
// backward so both walk exactly the same (q-block, k-block) grid.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference/mask_oracle.h"

namespace fastattn::cpu {

struct Tiling {
  int block_q = 64;
  int block_k = 64;
};

// Smaller tiles for very wide heads keep a tile's operands near L2 size.
inline Tiling choose_tiling(int head_dim, int head_dim_v) {
  const int widest = head_dim > head_dim_v ? head_dim : head_dim_v;
  return widest > 256 ? Tiling{32, 32} : Tiling{64, 64};
}

// s[r * ld + c] = -inf for every (row i0 + r, key j0 + c) the oracle does not keep.
inline void mask_partial_tile(const reference::MaskRule& m, int64_t i0, int rows, int64_t j0,
                              int cols, float* s, int ld) {
  for (int r = 0; r < rows; ++r) {
    const reference::KeyRange kr = reference::key_range(m, i0 + r);
    float* row = s + r * ld;
    for (int c = 0; c < cols; ++c) {
      const int64_t j = j0 + c;
      if (j < kr.begin || j >= kr.end) row[c] = -INFINITY;
    }
  }
}

// s[r * ld + c] = -inf for every (row i0 + r, key j0 + c) that the head's mask does not keep: the
// window as above, then the block mask's dropped blocks or the bitmask's cleared bits (rows the
// window empties are done already).
inline void mask_partial_tile(const reference::HeadMask& m, int64_t i0, int rows, int64_t j0, int cols, float* s,
                              int ld) {
  mask_partial_tile(m.rule, i0, rows, j0, cols, s, ld);
  if (m.bits != nullptr) {  // element bitmask: each window-kept pair by its bit
    for (int r = 0; r < rows; ++r) {
      const reference::KeyRange kr = reference::key_range(m.rule, i0 + r);
      if (kr.empty()) continue;
      const uint32_t* bits = m.bits->row(m.b, m.h, i0 + r);
      float* row = s + r * ld;
      const int64_t c0 = std::max<int64_t>(0, kr.begin - j0), c1 = std::min<int64_t>(cols, kr.end - j0);
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t j = j0 + c;
        if (((bits[j / 32] >> (j % 32)) & 1u) == 0) row[c] = -INFINITY;
      }
    }
    return;
  }
  if (m.blocks == nullptr) return;
  const detail::BlockMaskView& v = *m.blocks;
  for (int r = 0; r < rows; ++r) {
    if (reference::key_range(m.rule, i0 + r).empty()) continue;
    const uint8_t* entry = v.at(m.b, m.h, (i0 + r) / v.block_q, 0);
    float* row = s + r * ld;
    for (int c = 0; c < cols;) {  // one run per key block
      const int64_t kb = (j0 + c) / v.block_k;
      const int end = int(std::min<int64_t>(cols, (kb + 1) * v.block_k - j0));
      if (entry[kb * v.col_stride] == 0) std::fill(row + c, row + end, -INFINITY);
      c = end;
    }
  }
}

// Scores x -> softcap * tanh(x / softcap) (only called when softcap > 0).
inline void apply_softcap(float cap, int rows, int cols, float* s, int ld) {
  const float inv = 1.0f / cap;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) s[r * ld + c] = cap * std::tanh(s[r * ld + c] * inv);
  }
}

}  // namespace fastattn::cpu
