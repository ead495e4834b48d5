// The running max of a softmax row that keeps NaN: once a score is NaN the max is NaN (std::max and
// fmax drop it), so that a NaN score reaches out and lse (docs/masks.md, "NaN"). The reference and the
// CPU backend take their row maxima through it.
#pragma once

#include <cmath>

namespace fastattn::util {

template <class F>
inline F max_keeping_nan(F m, F x) {
  return x > m || std::isnan(x) ? x : m;  // a NaN m stays: x > NaN is false
}

}  // namespace fastattn::util
