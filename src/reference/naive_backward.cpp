// Float64 backward straight from the definition. Per kept (i, j), with P = softmax row i:
//   dv_j += P_ij dO_i;  dP_ij = dO_i . v_j;  D_i = sum_j P_ij dP_ij;  dS_ij = P_ij (dP_ij - D_i)
//   (Options::round_p_to_input_dtype: D_i = dO_i . out_i, out_i as the forward's baseline stores it)
//   softcap: s = c tanh(x / c) + bias  =>  ds/dx = 1 - (tanh(x / c))^2;  dX = dS * ds/dx
//   dbias_ij += dS_ij (summed over the batch entries / q heads that share the bias entry)
//   dq_i += scale dX_ij k_j;  dk_j += scale dX_ij q_i.
// Work is split by (batch, kv head) so dk/dv of a GQA group are summed without races.
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

namespace {

// D = rowsum(dO * out) with out as a kernel reads it: the forward's output in the input precision
// (P rounded before P V as forward_f64 with the same option, then out rounded). Equal to
// sum_j P_j dP_j up to those roundings, which every backward that reads the stored out inherits.
template <class Round>
double rowsum_dout_out_rounded(const std::vector<double>& s, const std::vector<char>& kept, double m, double sum,
                               const std::vector<double>& vmat, const std::vector<double>& dO, Round&& rounded) {
  const int64_t dv = int64_t(dO.size());
  std::vector<double> out(dO.size(), 0.0);
  for (size_t j = 0; j < kept.size(); ++j) {
    if (!kept[j]) continue;
    const double pe = rounded(std::exp(s[j] - m));
    for (int64_t c = 0; c < dv; ++c) out[size_t(c)] += pe * vmat[j * size_t(dv) + size_t(c)];
  }
  double D = 0;
  for (int64_t c = 0; c < dv; ++c) D += dO[size_t(c)] * rounded(out[size_t(c)] / sum);
  return D;
}

// dbias in the bias's logical shape: each (b, h) adds its dS into entry (b or 0, h / head_div).
void sum_dbias(const detail::Problem& p, const std::vector<double>& ds_all, int64_t ds_rows, int64_t ds_cols,
               std::vector<double>* dbias) {
  const detail::BiasView& bias = p.bias;
  dbias->assign(size_t(int64_t(bias.batch) * bias.heads * bias.rows * bias.cols), 0.0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::Sequence& seq = p.seqs[size_t(b)];
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t entry = (bias.batch == 1 ? 0 : b) * bias.heads + h / bias.head_div;
      for (int64_t i = 0; i < seq.rows_q; ++i) {
        const double* src = &ds_all[size_t(((b * p.heads_q + h) * ds_rows + i) * ds_cols)];
        double* dst = &(*dbias)[size_t((entry * bias.rows + i) * bias.cols)];
        for (int64_t j = 0; j < seq.rows_k; ++j) dst[j] += src[j];
      }
    }
  }
}

}  // namespace

void backward_f64(const detail::Problem& p, const detail::Operand& dout, BackwardF64* r,
                  const Options& opt) {
  const int64_t d = p.head_dim, dv = p.head_dim_v;
  const double scale = p.scale, cap = p.softcap;
  r->dq.assign(size_t(p.total_q * p.heads_q * d), 0.0);
  r->dk.assign(size_t(p.total_k * p.heads_kv * d), 0.0);
  r->dv.assign(size_t(p.total_k * p.heads_kv * dv), 0.0);
  const MaskOracle oracle(p);
  auto rounded = [&](double x) {
    return opt.round_p_to_input_dtype ? double(util::round_to(p.dtype, float(x))) : x;
  };

  // dS of every (b, h, i, j) in a (batch, heads_q, max_rows_q, max_rows_k) buffer when the call
  // has a bias: items write disjoint parts; the broadcast sums run afterwards, in one thread.
  const int64_t ds_rows = p.max_rows_q, ds_cols = p.max_rows_k;
  std::vector<double> ds_all;
  if (p.bias.defined()) ds_all.assign(size_t(int64_t(p.batch) * p.heads_q * ds_rows * ds_cols), 0.0);

  const int64_t items = int64_t(p.batch) * p.heads_kv;
  util::parallel_for(items, util::worker_count(p.num_threads, items), [&](int64_t item, int) {
    const int64_t b = item / p.heads_kv, hk = item % p.heads_kv;
    const detail::Sequence& seq = p.seqs[size_t(b)];
    const int64_t nk = seq.rows_k;
    std::vector<double> kmat(size_t(nk * d)), vmat(size_t(nk * dv));
    for (int64_t j = 0; j < nk; ++j) {
      read_row(p.k, b, seq.k_start + j, hk, d, &kmat[size_t(j * d)]);
      read_row(p.v, b, seq.k_start + j, hk, dv, &vmat[size_t(j * dv)]);
    }
    std::vector<double> q(static_cast<size_t>(d)), dO(static_cast<size_t>(dv)), s(static_cast<size_t>(nk)),
        prob(static_cast<size_t>(nk)), dp(static_cast<size_t>(nk)), capped(static_cast<size_t>(nk));
    std::vector<char> kept(static_cast<size_t>(nk));
    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h) {
      for (int64_t i = 0; i < seq.rows_q; ++i) {
        read_row(p.q, b, seq.q_start + i, h, d, q.data());
        read_row(dout, b, seq.q_start + i, h, dv, dO.data());
        const double m = score_row(oracle, b, h, i, nk, d, q.data(), kmat, scale, cap, s, kept, &p.bias, &p.alibi, &capped);
        if (m == -std::numeric_limits<double>::infinity()) continue;  // no kept key: no gradient
        double sum = 0;
        for (int64_t j = 0; j < nk; ++j) {
          if (kept[size_t(j)]) sum += std::exp(s[size_t(j)] - m);
        }
        double D = 0;
        for (int64_t j = 0; j < nk; ++j) {
          if (!kept[size_t(j)]) continue;
          prob[size_t(j)] = std::exp(s[size_t(j)] - m) / sum;
          double acc = 0;
          for (int64_t c = 0; c < dv; ++c) acc += dO[size_t(c)] * vmat[size_t(j * dv + c)];
          dp[size_t(j)] = acc;
          D += prob[size_t(j)] * acc;
        }
        if (opt.round_p_to_input_dtype) D = rowsum_dout_out_rounded(s, kept, m, sum, vmat, dO, rounded);
        double* dq = &r->dq[size_t((q_token(p, b, i) * p.heads_q + h) * d)];
        for (int64_t j = 0; j < nk; ++j) {
          if (!kept[size_t(j)]) continue;
          const double pj = prob[size_t(j)];
          double dx = pj * (dp[size_t(j)] - D);
          if (!ds_all.empty()) ds_all[size_t(((b * p.heads_q + h) * ds_rows + i) * ds_cols + j)] = dx;
          if (cap > 0) dx *= 1.0 - (capped[size_t(j)] / cap) * (capped[size_t(j)] / cap);
          dx = rounded(dx) * scale;
          const double pr = rounded(pj);
          const int64_t kt = k_token(p, b, j);
          double* dk = &r->dk[size_t((kt * p.heads_kv + hk) * d)];
          double* dvv = &r->dv[size_t((kt * p.heads_kv + hk) * dv)];
          for (int64_t c = 0; c < d; ++c) {
            dq[c] += dx * kmat[size_t(j * d + c)];
            dk[c] += dx * q[size_t(c)];
          }
          for (int64_t c = 0; c < dv; ++c) dvv[c] += pr * dO[size_t(c)];
        }
      }
    }
  });
  if (p.bias.defined()) sum_dbias(p, ds_all, ds_rows, ds_cols, &r->dbias);
}

}  // namespace fastattn::reference
