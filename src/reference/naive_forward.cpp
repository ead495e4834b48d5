// Float64 forward straight from the definition (see reference.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "util/half.h"
#include "util/parallel_for.h"
#include "reference/canonical_layout.h"
#include "reference/mask_oracle.h"
#include "reference/reference.h"
#include "reference/score_row.h"

namespace fastattn::reference {

void forward_f64(const detail::Problem& p, ForwardF64* r, const Options& opt) {
  const int64_t d = p.head_dim, dv = p.head_dim_v;
  const double scale = p.scale, cap = p.softcap;
  r->out.assign(size_t(p.total_q * p.heads_q * dv), 0.0);
  r->lse.assign(size_t(p.total_q * p.heads_q), -std::numeric_limits<double>::infinity());
  const MaskOracle oracle(p);

  const int64_t items = int64_t(p.batch) * p.heads_q;
  util::parallel_for(items, util::worker_count(p.num_threads, items), [&](int64_t item, int) {
    const int64_t b = item / p.heads_q, h = item % p.heads_q, hk = h / p.group;
    const detail::Sequence& seq = p.seqs[size_t(b)];
    std::vector<double> kmat(size_t(seq.rows_k * d)), vmat(size_t(seq.rows_k * dv));
    for (int64_t j = 0; j < seq.rows_k; ++j) {
      read_row(p.k, b, seq.k_start + j, hk, d, &kmat[size_t(j * d)]);
      read_row(p.v, b, seq.k_start + j, hk, dv, &vmat[size_t(j * dv)]);
    }
    std::vector<double> q(static_cast<size_t>(d)), s(static_cast<size_t>(seq.rows_k));
    std::vector<char> kept(size_t(seq.rows_k));
    for (int64_t i = 0; i < seq.rows_q; ++i) {
      read_row(p.q, b, seq.q_start + i, h, d, q.data());
      const double m = score_row(oracle, b, h, i, seq.rows_k, d, q.data(), kmat, scale, cap, s, kept, &p.bias, &p.alibi);
      if (m == -std::numeric_limits<double>::infinity()) continue;  // no kept key: 0 / -inf
      double sum = 0;
      double* o = &r->out[size_t((q_token(p, b, i) * p.heads_q + h) * dv)];
      for (int64_t j = 0; j < seq.rows_k; ++j) {
        if (!kept[size_t(j)]) continue;
        const double e = std::exp(s[size_t(j)] - m);
        sum += e;
        const double pe = opt.round_p_to_input_dtype ? double(util::round_to(p.dtype, float(e))) : e;
        for (int64_t c = 0; c < dv; ++c) o[c] += pe * vmat[size_t(j * dv + c)];
      }
      for (int64_t c = 0; c < dv; ++c) o[c] /= sum;
      r->lse[size_t(lse_index(p, b, h, i))] = m + std::log(sum);
    }
  });
}

}  // namespace fastattn::reference
