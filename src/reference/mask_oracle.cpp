#include "reference/mask_oracle.h"

namespace fastattn::reference {

MaskOracle::MaskOracle(const detail::Problem& p) : problem_(&p) {}

MaskRule MaskOracle::rule(int64_t b) const {
  const detail::Sequence& s = problem_->seqs[size_t(b)];
  return {s.len_q, s.len_k, problem_->window_left, problem_->window_right};
}

bool MaskOracle::keep(int64_t b, int64_t /*h: masks are per sequence today*/, int64_t i,
                      int64_t j) const {
  return reference::keep(rule(b), i, j);
}

}  // namespace fastattn::reference
