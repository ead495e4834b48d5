// Index arithmetic for the reference's float64 results, which are laid out contiguously in
// the shape of the corresponding tensor (see ForwardF64 / BackwardF64), and row reads from
// strided host memory of any dtype.
#pragma once

#include <cstdint>

#include "api/problem.h"
#include "util/half.h"

namespace fastattn::reference {

// Token index of row t of sequence b along the tensor's token axes (flattened batch*seqlen
// for the fixed layout, packed index for varlen).
inline int64_t q_token(const detail::Problem& p, int64_t b, int64_t t) {
  return p.varlen ? p.seqs[size_t(b)].q_start + t : b * p.max_rows_q + t;
}
inline int64_t k_token(const detail::Problem& p, int64_t b, int64_t t) {
  return p.varlen ? p.seqs[size_t(b)].k_start + t : b * p.max_rows_k + t;
}
// Offset of lse row t of (b, h) in the (b, h_q, s_q) or (h_q, total_q) layout.
inline int64_t lse_index(const detail::Problem& p, int64_t b, int64_t h, int64_t t) {
  return p.varlen ? h * p.total_q + p.seqs[size_t(b)].q_start + t
                  : (b * p.heads_q + h) * p.max_rows_q + t;
}

// Row (b, token t of the operand's token axis, head h), n columns, as float64.
inline void read_row(const detail::Operand& o, int64_t b, int64_t t, int64_t h, int64_t n,
                     double* dst) {
  const char* row = o.row(b, t, h);
  const int esize = dtype_size(o.dtype);
  for (int64_t x = 0; x < n; ++x) dst[x] = util::load_as_float(row + x * esize, o.dtype);
}

inline void write_row(const detail::Operand& o, int64_t b, int64_t t, int64_t h, int64_t n,
                      const double* src) {
  char* row = o.row(b, t, h);
  const int esize = dtype_size(o.dtype);
  for (int64_t x = 0; x < n; ++x) util::store_from_float(row + x * esize, o.dtype, float(src[x]));
}

}  // namespace fastattn::reference
