#include "reference/mask_oracle.h"

namespace fastattn::reference {

HeadMask head_mask(const detail::Problem& p, int64_t b, int64_t h) {
  const detail::Sequence& s = p.seqs[size_t(b)];
  return {{s.len_q, s.len_k, p.window_left, p.window_right}, p.blocks.defined() ? &p.blocks : nullptr, b, h,
          p.bits.defined() ? &p.bits : nullptr};
}

MaskOracle::MaskOracle(const detail::Problem& p) : problem_(&p) {}

MaskRule MaskOracle::rule(int64_t b) const { return head_mask(*problem_, b, 0).rule; }

HeadMask MaskOracle::head(int64_t b, int64_t h) const { return head_mask(*problem_, b, h); }

bool MaskOracle::keep(int64_t b, int64_t h, int64_t i, int64_t j) const { return head(b, h).keep(i, j); }

}  // namespace fastattn::reference
