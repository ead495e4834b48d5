// The one mask truth. Every backend, mask policy and test is checked against keep().
//
// For query row i and key column j of one sequence whose used lengths are (len_q, len_k):
//   the diagonal of row i is   diag(i) = i + len_k - len_q
//   ("bottom-right aligned", as FlashAttention 2/3: the last query sees the last key), and
//   keep(i, j)  <=>  0 <= i < len_q  and  0 <= j < len_k
//                    and (window_left  == -1 or j >= diag(i) - window_left)
//                    and (window_right == -1 or j <= diag(i) + window_right).
// Causal is the local window (window_left, 0); plain attention is (-1, -1). When len_q > len_k,
// causal rows i < len_q - len_k keep no key at all: their out is 0 and their lse is -inf.
// A block-sparse mask (MaskKind::BlockSparse) then cuts holes in that interval, per query head:
//   keep(b, h, i, j)  <=>  keep(i, j) above  and  blocks.keeps(b, h, i, j)
// (entry (b or 0, h / head_div, i / block_q, j / block_k) nonzero). key_range() stays the
// window's interval. An element bitmask (MaskKind::DenseBitmask) likewise:
//   keep(b, h, i, j)  <=>  keep(i, j) above  and  bit j of mask row (b or 0, h / head_div, i) is set.
// HeadMask::keep is the whole rule.
#pragma once

#include <algorithm>
#include <cstdint>

#include "api/problem.h"

namespace fastattn::reference {

// The window mask of one sequence (one batch entry; every head shares it).
struct MaskRule {
  int32_t len_q = 0;
  int32_t len_k = 0;
  int32_t window_left = -1;
  int32_t window_right = -1;
};

// Keys kept by row i form one contiguous range [begin, end) (possibly empty): the rule is an
// intersection of intervals. Tile classification is derived from this range.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
};

inline KeyRange key_range(const MaskRule& m, int64_t i) {
  if (i < 0 || i >= m.len_q) return {0, 0};
  const int64_t diag = i + int64_t(m.len_k) - m.len_q;
  int64_t begin = 0, end = m.len_k;
  if (m.window_left >= 0) begin = std::max<int64_t>(begin, diag - m.window_left);
  if (m.window_right >= 0) end = std::min<int64_t>(end, diag + m.window_right + 1);
  return {begin, std::max(begin, end)};
}

inline bool keep(const MaskRule& m, int64_t i, int64_t j) {
  const KeyRange r = key_range(m, i);
  return j >= r.begin && j < r.end;
}

// The mask of one (sequence b, query head h): the window rule and, when the call has one, the
// block mask's slice of that head.
struct HeadMask {
  MaskRule rule;
  const detail::BlockMaskView* blocks = nullptr;  // null: no block mask
  int64_t b = 0, h = 0;
  const detail::BitMaskView* bits = nullptr;      // null: no element bitmask

  bool keep(int64_t i, int64_t j) const {
    return reference::keep(rule, i, j) && (blocks == nullptr || blocks->keeps(b, h, i, j)) &&
           (bits == nullptr || bits->keeps(b, h, i, j));
  }
};

// Head h of sequence b of a resolved problem (p.seqs filled).
HeadMask head_mask(const detail::Problem& p, int64_t b, int64_t h);

// keep(b, h, i, j) over a whole resolved problem.
class MaskOracle {
 public:
  explicit MaskOracle(const detail::Problem& p);
  MaskRule rule(int64_t b) const;
  HeadMask head(int64_t b, int64_t h) const;
  bool keep(int64_t b, int64_t h, int64_t i, int64_t j) const;

 private:
  const detail::Problem* problem_;
};

}  // namespace fastattn::reference
