#include "support/bias_case.h"

#include <cmath>
#include <sstream>

namespace fastattn::testing {

std::string BiasSpec::describe() const {
  if (!on) return "";
  std::ostringstream os;
  os << " bias=(" << dtype_name(dtype) << "," << (per_batch ? "batch" : "1") << "," << heads;
  if (extra_rows || extra_cols) os << ",extra " << extra_rows << "/" << extra_cols;
  if (layout) os << ",layout " << layout;
  if (neginf > 0) os << ",-inf " << neginf;
  if (neginf_row >= 0) os << ",-inf row " << neginf_row;
  if (grad) os << ",dbias";
  os << ")";
  return os.str();
}

HostBias make_bias(const BiasSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng) {
  HostBias h;
  const int64_t bb = spec.per_batch ? batch : 1, bh = spec.heads;
  const int64_t rows = std::max<int64_t>(1, max_rows_q + spec.extra_rows);
  const int64_t cols = std::max<int64_t>(1, max_rows_k + spec.extra_cols);
  const int64_t stored_heads = spec.layout == 2 ? 1 : bh;
  h.storage = HostTensor(spec.dtype, {bb, stored_heads, rows, cols}, spec.layout == 1 ? 8 : 0);
  h.storage.fill_uniform(rng, -spec.range, spec.range);
  const int64_t n = h.storage.numel();
  for (int64_t e = 0; e < n; ++e) {
    const int64_t row = (e / cols) % rows;
    if (row == spec.neginf_row || (spec.neginf > 0 && rng.uniform(0.0f, 1.0f) < spec.neginf))
      h.storage.set(e, -INFINITY);
  }
  if (spec.layout == 2) h.broadcast_heads = bh;
  return h;
}

Tensor HostBias::view() const {
  Tensor t = storage.view();
  if (broadcast_heads > 0) {
    t.shape[1] = broadcast_heads;
    t.stride[1] = 0;
  }
  return t;
}

}  // namespace fastattn::testing
