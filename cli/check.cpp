#include "check.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>

#include "util/half.h"
#include "flops.h"
#include "reference/reference.h"

namespace fastattn::cli {
namespace {

// Tolerances, on max|got - ref| / max(1, max|ref|); see `fastattn run --help`.
double out_tol(DType dt) { return dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : 1e-4; }
double lse_tol(DType dt) { return dt == DType::F32 ? 1e-4 : 1e-3; }
double grad_tol(DType dt) { return 4 * out_tol(dt); }

// The reference can afford a whole batch entry's backward (for dk/dv) up to this many FLOPs.
constexpr double kFullBatchBudget = 4e9;

void require(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string("reference ") + what + ": " + st.message);
}

std::vector<int64_t> sample_rows(int64_t seqlen, int64_t n, std::mt19937_64& rng) {
  std::set<int64_t> rows;
  n = std::min(n, seqlen);
  if (n >= 2) rows = {0, seqlen - 1};  // the edges are where masks go wrong
  std::uniform_int_distribution<int64_t> pick(0, seqlen - 1);
  while (int64_t(rows.size()) < n) rows.insert(pick(rng));
  return {rows.begin(), rows.end()};
}

// Views of one batch entry of the host inputs (any dtype: the reference reads them as they are),
// with scratch out/lse that validation asks for; results come back in float64.
struct BatchView {
  const RunOptions& o;
  HostInputs& in;
  int64_t b;
  std::vector<std::byte> out_scratch, lse_scratch;

  std::byte* at(std::vector<std::byte>& t, int64_t elems_before) {
    return t.data() + elems_before * dtype_size(o.dtype);
  }
  // q rows [row, row + rows) against the key prefix [0, keys).
  AttnArgs args(int64_t row, int64_t rows, int64_t keys) {
    out_scratch.resize(size_t(rows * o.heads * o.dim_v * dtype_size(o.dtype)));
    lse_scratch.resize(size_t(rows * o.heads * 4));
    AttnArgs a;
    a.backend = Backend::Reference;
    a.q = q_like(o, at(in.q, (b * o.seqlen + row) * o.heads * o.dim), o.dtype, 1, rows, o.dim);
    a.k = kv_like(o, at(in.k, b * o.seqlen_k * o.kv_heads * o.dim), o.dtype, 1, keys, o.dim);
    a.v = kv_like(o, at(in.v, b * o.seqlen_k * o.kv_heads * o.dim_v), o.dtype, 1, keys, o.dim_v);
    a.out = q_like(o, out_scratch.data(), o.dtype, 1, rows, o.dim_v);
    a.lse = make_tensor(lse_scratch.data(), DType::F32, {1, o.heads, rows});
    a.causal = *o.causal;
    a.window_left = int32_t(o.window_left);
    a.window_right = int32_t(o.window_right);
    a.softcap = o.softcap;
    if (o.scale) a.softmax_scale = *o.scale;
    return a;
  }
  Tensor dout(int64_t row, int64_t rows) {
    return q_like(o, at(in.dout, (b * o.seqlen + row) * o.heads * o.dim_v), o.dtype, 1, rows,
                  o.dim_v);
  }
};

}  // namespace

// Row i alone, as a problem with one query row and the key prefix [0, end). Row i keeps keys
// [diag - L, diag + R] with diag = i + s_k - s_q. The sub-problem's single row has
// diag' = end - 1, so its window becomes (L + delta, R - delta) with delta = end - 1 - diag: the
// same keys. `end` stops right after the last key the row can keep (R >= 0 whenever bounded).
RowReference reference_row(const RunOptions& o, HostInputs& in, int64_t batch, int64_t i) {
  const reference::MaskRule rule =
      mask_rule(o.seqlen, o.seqlen_k, *o.causal, o.window_left, o.window_right);
  const int64_t diag = i + o.seqlen_k - o.seqlen;
  const int64_t R = rule.window_right, L = rule.window_left;
  const int64_t end = R < 0 ? o.seqlen_k : std::min(o.seqlen_k, diag + R + 1);

  RowReference r;
  if (end <= 0) {  // keeps no key: out 0, lse -inf, dq 0 (the contract in types.h)
    r.out.assign(size_t(o.heads * o.dim_v), 0.0);
    r.lse.assign(size_t(o.heads), -INFINITY);
    r.dq.assign(size_t(o.heads * o.dim), 0.0);
    return r;
  }
  const int64_t delta = end - 1 - diag;
  BatchView view{o, in, batch, {}, {}};
  AttnArgs a = view.args(i, 1, end);
  a.causal = false;
  a.window_left = int32_t(L < 0 ? -1 : L + delta);
  a.window_right = int32_t(R < 0 ? -1 : R - delta);
  reference::ForwardF64 fwd;
  require(reference::forward_f64(a, &fwd), "forward");
  r.out = std::move(fwd.out);
  r.lse = std::move(fwd.lse);
  if (o.backward) {
    reference::BackwardF64 bwd;
    require(reference::backward_f64(a, view.dout(i, 1), &bwd), "backward");
    r.dq = std::move(bwd.dq);
  }
  return r;
}

void ErrorStats::add(float got, double ref) {
  if (std::isinf(ref) && got == ref) return;  // -inf lse of an empty row
  if (!std::isfinite(got) || !std::isfinite(ref)) {
    ++bad;
    return;
  }
  max_abs = std::max(max_abs, std::fabs(double(got) - ref));
  max_ref = std::max(max_ref, std::fabs(ref));
}

bool CheckReport::ok() const {
  return std::all_of(stats.begin(), stats.end(), [](const ErrorStats& s) { return s.ok(); });
}

CheckReport check_against_reference(const RunOptions& o, HostInputs& in,
                                    const HostOutputs& got) {
  CheckReport rep;
  std::mt19937_64 rng(o.seed ^ 0x5eedc0de);
  rep.batch = std::uniform_int_distribution<int64_t>(0, o.batch - 1)(rng);
  rep.rows = sample_rows(o.seqlen, o.check_rows, rng);
  const int64_t b = rep.batch;

  BatchView view{o, in, b, {}, {}};
  ErrorStats out_err("out", out_tol(o.dtype)), lse_err("lse", lse_tol(o.dtype));
  ErrorStats dq_err("dq", grad_tol(o.dtype));
  const int64_t es = dtype_size(o.dtype);
  const float* got_lse = reinterpret_cast<const float*>(got.lse.data());
  for (int64_t i : rep.rows) {
    const RowReference r = reference_row(o, in, b, i);
    const std::byte* go = got.out.data() + ((b * o.seqlen + i) * o.heads * o.dim_v) * es;
    for (int64_t x = 0; x < o.heads * o.dim_v; ++x)
      out_err.add(util::load_as_float(go + x * es, o.dtype), r.out[x]);
    for (int64_t h = 0; h < o.heads; ++h)
      lse_err.add(got_lse[(b * o.heads + h) * o.seqlen + i], r.lse[h]);
    if (o.backward) {
      const std::byte* gq = got.dq.data() + ((b * o.seqlen + i) * o.heads * o.dim) * es;
      for (int64_t x = 0; x < o.heads * o.dim; ++x)
        dq_err.add(util::load_as_float(gq + x * es, o.dtype), r.dq[x]);
    }
  }
  rep.stats = {out_err, lse_err};
  if (!o.backward) return rep;
  rep.stats.push_back(dq_err);

  const reference::MaskRule rule =
      mask_rule(o.seqlen, o.seqlen_k, *o.causal, o.window_left, o.window_right);
  const double cost = 3.5 * forward_flops(1, o.heads, o.dim, o.dim_v, rule);
  if (cost > kFullBatchBudget) {
    rep.note = "dk/dv not checked: the float64 reference of a whole batch entry is too slow here "
               "(tests/cpu cover them)";
    return rep;
  }
  // dk and dv sum over every query row, so rows cannot be sampled: the whole batch entry.
  ErrorStats dk_err("dk", grad_tol(o.dtype)), dv_err("dv", grad_tol(o.dtype));
  reference::BackwardF64 full;
  require(reference::backward_f64(view.args(0, o.seqlen, o.seqlen_k), view.dout(0, o.seqlen), &full),
          "backward");
  const std::byte* gk = got.dk.data() + b * int64_t(full.dk.size()) * es;
  const std::byte* gv = got.dv.data() + b * int64_t(full.dv.size()) * es;
  for (size_t x = 0; x < full.dk.size(); ++x)
    dk_err.add(util::load_as_float(gk + x * es, o.dtype), full.dk[x]);
  for (size_t x = 0; x < full.dv.size(); ++x)
    dv_err.add(util::load_as_float(gv + x * es, o.dtype), full.dv[x]);
  rep.stats.push_back(dk_err);
  rep.stats.push_back(dv_err);
  return rep;
}

}  // namespace fastattn::cli
