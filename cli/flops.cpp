#include "flops.h"

namespace fastattn::cli {

reference::MaskRule mask_rule(int64_t seqlen_q, int64_t seqlen_k, bool causal, int64_t window_left,
                              int64_t window_right) {
  return {int32_t(seqlen_q), int32_t(seqlen_k), int32_t(window_left),
          detail::fold_causal(causal, int32_t(window_right))};
}

int64_t kept_pairs(const reference::MaskRule& m) {
  int64_t n = 0;
  for (int64_t i = 0; i < m.len_q; ++i) {
    const reference::KeyRange r = reference::key_range(m, i);
    n += r.end - r.begin;
  }
  return n;
}

double forward_flops(int64_t batch, int64_t heads, int64_t dim, int64_t dim_v,
                     const reference::MaskRule& m) {
  return double(batch) * double(heads) * double(kept_pairs(m)) * (2.0 * double(dim + dim_v));
}

}  // namespace fastattn::cli
