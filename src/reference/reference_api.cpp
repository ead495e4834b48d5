// The reference's entry points: validation through src/api, then float64 results either
// returned as vectors or written (rounded) into the caller's tensors.
#include "api/validate.h"
#include "reference/canonical_layout.h"
#include "reference/reference.h"

namespace fastattn::reference {
namespace {

AttnArgs as_reference(const AttnArgs& args) {
  AttnArgs a = args;
  a.backend = Backend::Reference;
  return a;
}

// Copies a contiguous float64 block shaped like `o`'s rows into the strided operand.
void write_rows(const detail::Problem& p, const detail::Operand& o, bool kv_side, int64_t heads,
                int64_t cols, const std::vector<double>& src) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::Sequence& s = p.seqs[size_t(b)];
    const int64_t rows = kv_side ? s.rows_k : s.rows_q;
    const int64_t start = kv_side ? s.k_start : s.q_start;
    for (int64_t t = 0; t < rows; ++t) {
      const int64_t tok = kv_side ? k_token(p, b, t) : q_token(p, b, t);
      for (int64_t h = 0; h < heads; ++h) {
        write_row(o, b, start + t, h, cols, &src[size_t((tok * heads + h) * cols)]);
      }
    }
  }
}

}  // namespace

Status forward(const detail::Problem& p, const Options& opt) {
  ForwardF64 r;
  forward_f64(p, &r, opt);
  write_rows(p, p.out, false, p.heads_q, p.head_dim_v, r.out);
  if (p.lse.defined()) {
    for (int64_t b = 0; b < p.batch; ++b) {
      const detail::Sequence& s = p.seqs[size_t(b)];
      for (int64_t h = 0; h < p.heads_q; ++h) {
        float* row = reinterpret_cast<float*>(p.lse.row(b, s.q_start, h));
        for (int64_t t = 0; t < s.rows_q; ++t) row[t] = float(r.lse[size_t(lse_index(p, b, h, t))]);
      }
    }
  }
  return Status::Ok();
}

Status backward(const detail::Problem& p, const detail::GradOperands& g, const Options& opt) {
  BackwardF64 r;
  backward_f64(p, g.dout, &r, opt);
  write_rows(p, g.dq, false, p.heads_q, p.head_dim, r.dq);
  write_rows(p, g.dk, true, p.heads_kv, p.head_dim, r.dk);
  write_rows(p, g.dv, true, p.heads_kv, p.head_dim_v, r.dv);
  if (g.dbias.defined()) {
    const detail::BiasView& db = g.dbias;
    for (int64_t e = 0; e < int64_t(db.batch) * db.heads; ++e) {
      for (int64_t i = 0; i < db.rows; ++i) {
        // Entry e = (batch entry, bias head); dbias's head_div maps q heads, so address it directly.
        float* row = reinterpret_cast<float*>(static_cast<char*>(db.data)) +
                     (e / db.heads) * db.batch_stride + (e % db.heads) * db.head_stride + i * db.row_stride;
        const double* src = &r.dbias[size_t((e * db.rows + i) * db.cols)];
        for (int64_t j = 0; j < db.cols; ++j) row[j] = float(src[j]);
      }
    }
  }
  return Status::Ok();
}

Status forward_f64(const AttnArgs& args, ForwardF64* result, const Options& opt) {
  detail::Prepared prep;
  Status st = detail::prepare_forward(as_reference(args), &prep);
  if (st.ok()) forward_f64(prep.problem, result, opt);
  return st;
}

Status backward_f64(const AttnArgs& args, const Tensor& dout, BackwardF64* result,
                    const Options& opt) {
  // dq/dk/dv are not written here: validate with q/k/v standing in for them.
  detail::Prepared prep;
  Status st = detail::prepare_backward(as_reference(args), dout, args.q, args.k, args.v, &prep);
  if (st.ok()) backward_f64(prep.problem, prep.grads.dout, result, opt);
  return st;
}

Status forward(const AttnArgs& args, const Options& opt) {
  detail::Prepared prep;
  Status st = detail::prepare_forward(as_reference(args), &prep);
  return st.ok() ? forward(prep.problem, opt) : st;
}

Status backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, const Options& opt) {
  detail::Prepared prep;
  Status st = detail::prepare_backward(as_reference(args), dout, dq, dk, dv, &prep);
  return st.ok() ? backward(prep.problem, prep.grads, opt) : st;
}

}  // namespace fastattn::reference
