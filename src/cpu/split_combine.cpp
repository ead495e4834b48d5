#include "cpu/split_combine.h"

#include <algorithm>
#include <cmath>

namespace fastattn::cpu {

void combine_split_row(int splits, int64_t rows, int dv, const float* o, const float* lse, int64_t row,
                       float* out, float* lse_out) {
  float m = -INFINITY;
  bool nan = false;
  for (int s = 0; s < splits; ++s) {
    const float ls = lse[s * rows + row];
    m = std::max(m, ls);
    nan = nan || std::isnan(ls);
  }
  if (nan) {  // a NaN among a split's kept scores: the row is NaN, as the unsplit call's
    std::fill(out, out + dv, NAN);
    *lse_out = NAN;
    return;
  }
  std::fill(out, out + dv, 0.0f);
  if (m == -INFINITY) {
    *lse_out = -INFINITY;
    return;
  }
  float sum = 0;
  for (int s = 0; s < splits; ++s) {
    const float ls = lse[s * rows + row];
    if (ls == -INFINITY) continue;
    const float w = std::exp(ls - m);
    sum += w;
    const float* os = o + (s * rows + row) * dv;
    for (int c = 0; c < dv; ++c) out[c] += w * os[c];
  }
  const float inv = 1.0f / sum;  // sum >= 1: the largest split weighs exp(0)
  for (int c = 0; c < dv; ++c) out[c] *= inv;
  *lse_out = m + std::log(sum);
}

}  // namespace fastattn::cpu
