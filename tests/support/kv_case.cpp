#include "support/kv_case.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "util/half.h"
#include "fastattn/fastattn.h"

namespace fastattn::testing {
int64_t flat4(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return ((i0 * t.shape[1] + i1) * t.shape[2] + i2) * t.shape[3] + i3;
}

namespace {

double rounded(DType dt, double x) { return util::round_to(dt, float(x)); }

}  // namespace

std::string KvSpec::describe() const {
  std::ostringstream o;
  o << dtype_name(dtype) << " b" << batch << " sq" << seqlen_q << " h" << heads_q << "/" << heads_kv << " d"
    << head_dim << "/" << head_dim_v << " cache" << seqlen_cache << (page_size ? " page" + std::to_string(page_size) : "")
    << " new" << seqlen_new << " seqlens[";
  for (int s : seqlens) o << s << " ";
  o << "] idx" << batch_idx.size() << " leftpad" << leftpad.size() << " rot" << rotary_dim
    << (interleaved ? "i" : "n") << (causal ? " causal" : "") << " win(" << window_left << "," << window_right
    << ") softcap" << softcap << " splits" << num_splits << (nan_past_keys ? " nan-past-keys" : "")
    << (alibi ? " alibi" + std::to_string(alibi) : "");
  return o.str();
}

int KvCase::pages_per_seq() const { return spec.page_size ? spec.seqlen_cache / spec.page_size : 0; }

int KvCase::cached(int b) const { return seqlens.empty() ? spec.seqlen_cache : seqlens[size_t(b)]; }
int KvCase::first_key(int b) const { return leftpad.empty() ? 0 : leftpad[size_t(b)]; }

std::pair<int64_t, int64_t> KvCase::slot(int b, int64_t pos) const {
  if (spec.page_size) {
    return {page_table[size_t(b * pages_per_seq() + pos / spec.page_size)], pos % spec.page_size};
  }
  return {batch_idx.empty() ? b : batch_idx[size_t(b)], pos};
}

KvCase make_kv_case(const KvSpec& s, Rng& rng) {
  KvCase c;
  c.spec = s;
  const int rows = s.cache_batch ? s.cache_batch : s.batch;
  c.q = HostTensor(s.dtype, {s.batch, s.seqlen_q, s.heads_q, s.head_dim});
  c.k_cache = HostTensor(s.dtype, {rows, s.seqlen_cache, s.heads_kv, s.head_dim});
  c.v_cache = HostTensor(s.dtype, {rows, s.seqlen_cache, s.heads_kv, s.head_dim_v});
  c.k_new = HostTensor(s.dtype, {s.batch, s.seqlen_new, s.heads_kv, s.head_dim});
  c.v_new = HostTensor(s.dtype, {s.batch, s.seqlen_new, s.heads_kv, s.head_dim_v});
  for (HostTensor* t : {&c.q, &c.k_cache, &c.v_cache, &c.k_new, &c.v_new}) t->fill_uniform(rng, -1.0f, 1.0f);
  if (s.rotary_dim > 0) {
    // Causal / windowed q rows sit at cache_seqlens + i, past the capacity where seqlen_q > seqlen_new.
    const int64_t positions = s.seqlen_cache + (s.q_rows_advance() ? std::max(0, s.seqlen_q - s.seqlen_new) : 0);
    c.cos = HostTensor(s.dtype, {positions, s.rotary_dim / 2});
    c.sin = HostTensor(s.dtype, {positions, s.rotary_dim / 2});
    for (int64_t p = 0; p < positions; ++p) {
      for (int64_t j = 0; j < s.rotary_dim / 2; ++j) {
        const double angle = p * std::pow(10000.0, -2.0 * j / s.rotary_dim);
        c.cos.set(p * (s.rotary_dim / 2) + j, std::cos(angle));
        c.sin.set(p * (s.rotary_dim / 2) + j, std::sin(angle));
      }
    }
  }
  if (s.alibi) {
    c.slopes = s.alibi == 1 ? HostTensor(DType::F32, {s.heads_q}) : HostTensor(DType::F32, {s.batch, s.heads_q});
    c.slopes.fill_uniform(rng, 0.01f, 1.0f);
  }
  c.out = HostTensor(s.dtype, {s.batch, s.seqlen_q, s.heads_q, s.head_dim_v});
  c.lse = HostTensor(DType::F32, {s.batch, s.heads_q, s.seqlen_q});
  c.seqlens.assign(s.seqlens.begin(), s.seqlens.end());
  c.batch_idx.assign(s.batch_idx.begin(), s.batch_idx.end());
  c.leftpad.assign(s.leftpad.begin(), s.leftpad.end());
  if (s.nan_past_keys && !s.page_size) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int b = 0; b < s.batch; ++b)
      for (int64_t pos = 0; pos < s.seqlen_cache; ++pos) {
        if (pos >= c.first_key(b) && pos < c.cached(b) + s.seqlen_new) continue;
        const int64_t row = c.slot(b, pos).first;
        for (int64_t h = 0; h < s.heads_kv; ++h) {
          for (int64_t x = 0; x < s.head_dim; ++x) c.k_cache.set(flat4(c.k_cache.view(), row, pos, h, x), nan);
          for (int64_t x = 0; x < s.head_dim_v; ++x) c.v_cache.set(flat4(c.v_cache.view(), row, pos, h, x), nan);
        }
      }
  }
  if (s.page_size) {
    KvSpec flat = s;
    flat.page_size = 0;
    KvCase contiguous = make_kv_case(flat, rng);
    return to_paged(contiguous, s.page_size, rng);
  }
  return c;
}

KvCase to_paged(const KvCase& c, int page_size, Rng& rng) {
  KvCase p = c;
  p.spec.page_size = page_size;
  const int pps = c.spec.seqlen_cache / page_size;
  const int pages = c.spec.batch * pps + 3;  // a few pages no sequence uses
  p.k_cache = HostTensor(c.spec.dtype, {pages, page_size, c.spec.heads_kv, c.spec.head_dim});
  p.v_cache = HostTensor(c.spec.dtype, {pages, page_size, c.spec.heads_kv, c.spec.head_dim_v});
  p.k_cache.fill_uniform(rng, -1.0f, 1.0f);
  p.v_cache.fill_uniform(rng, -1.0f, 1.0f);
  std::vector<int32_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[size_t(rng.uniform_int(0, int(i)))]);
  p.page_table.assign(order.begin(), order.begin() + c.spec.batch * pps);
  p.batch_idx.clear();
  p.spec.batch_idx.clear();
  for (int b = 0; b < c.spec.batch; ++b) {
    for (int64_t pos = 0; pos < c.spec.seqlen_cache; ++pos) {
      const auto [row, at] = c.slot(b, pos);
      const auto [prow, pat] = p.slot(b, pos);
      for (int64_t h = 0; h < c.spec.heads_kv; ++h) {
        for (int64_t x = 0; x < c.spec.head_dim; ++x)
          p.k_cache.set(flat4(p.k_cache.view(), prow, pat, h, x), c.k_cache.get(flat4(c.k_cache.view(), row, at, h, x)));
        for (int64_t x = 0; x < c.spec.head_dim_v; ++x)
          p.v_cache.set(flat4(p.v_cache.view(), prow, pat, h, x), c.v_cache.get(flat4(c.v_cache.view(), row, at, h, x)));
      }
    }
  }
  return p;
}

KvCacheArgs KvCase::args(Backend backend) const {
  KvCacheArgs a;
  a.q = q.view();
  a.k_cache = k_cache.view();
  a.v_cache = v_cache.view();
  if (spec.pass_new) {
    a.k_new = k_new.view();
    a.v_new = v_new.view();
  }
  a.out = out.view();
  a.lse = lse.view();
  if (!seqlens.empty()) a.cache_seqlens = {seqlens.data(), int64_t(seqlens.size())};
  if (!batch_idx.empty()) a.cache_batch_idx = {batch_idx.data(), int64_t(batch_idx.size())};
  if (!leftpad.empty()) a.cache_leftpad = {leftpad.data(), int64_t(leftpad.size())};
  if (spec.page_size) a.page_table = {page_table.data(), spec.batch, pages_per_seq()};
  if (spec.alibi) a.alibi_slopes = slopes.view();
  if (spec.rotary_dim > 0) {
    a.rotary_cos = cos.view();
    a.rotary_sin = sin.view();
  }
  a.rotary_interleaved = spec.interleaved;
  a.causal = spec.causal;
  a.window_left = spec.window_left;
  a.window_right = spec.window_right;
  a.softcap = spec.softcap;
  a.num_splits = spec.num_splits;
  a.backend = backend;
  return a;
}

KvExpected expected_kvcache(const KvCase& c, const reference::Options& opt) {
  const KvSpec& s = c.spec;
  const DType dt = s.dtype;
  KvExpected e;
  e.k_cache = c.k_cache.to_f64();
  e.v_cache = c.v_cache.to_f64();
  e.k_rotated.assign(e.k_cache.size(), false);
  const int half = s.rotary_dim / 2;
  // Rotates row x (float64 values of the dtype) at position pos.
  auto rotate = [&](std::vector<double>& x, int64_t pos) {
    if (half == 0) return;
    const std::vector<double> in = x;
    for (int j = 0; j < half; ++j) {
      const double cj = c.cos.get(pos * half + j), sj = c.sin.get(pos * half + j);
      const int i0 = s.interleaved ? 2 * j : j, i1 = s.interleaved ? 2 * j + 1 : j + half;
      x[size_t(i0)] = rounded(dt, in[size_t(i0)] * cj - in[size_t(i1)] * sj);
      x[size_t(i1)] = rounded(dt, in[size_t(i0)] * sj + in[size_t(i1)] * cj);
    }
  };
  const Tensor& kc = c.k_cache.view();
  const Tensor& vc = c.v_cache.view();
  std::vector<double> row;
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < s.seqlen_new; ++i) {
      const int64_t pos = c.cached(b) + i;
      const auto [r, at] = c.slot(b, pos);
      for (int h = 0; h < s.heads_kv; ++h) {
        row.assign(size_t(s.head_dim), 0.0);
        for (int x = 0; x < s.head_dim; ++x) row[size_t(x)] = c.k_new.get(flat4(c.k_new.view(), b, i, h, x));
        rotate(row, pos);
        for (int x = 0; x < s.head_dim; ++x) {
          e.k_cache[size_t(flat4(kc, r, at, h, x))] = row[size_t(x)];
          e.k_rotated[size_t(flat4(kc, r, at, h, x))] = x < s.rotary_dim;
        }
        for (int x = 0; x < s.head_dim_v; ++x)
          e.v_cache[size_t(flat4(vc, r, at, h, x))] = c.v_new.get(flat4(c.v_new.view(), b, i, h, x));
      }
    }
  }

  // The attention: q rotated, each sequence's keys [first_key, cached + s_new) gathered.
  int max_keys = 0;
  for (int b = 0; b < s.batch; ++b) max_keys = std::max(max_keys, c.keys(b));
  HostTensor q = c.q;
  HostTensor k(dt, {s.batch, max_keys, s.heads_kv, s.head_dim}), v(dt, {s.batch, max_keys, s.heads_kv, s.head_dim_v});
  k.fill(0.0f);
  v.fill(0.0f);
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < s.seqlen_q; ++i) {
      for (int h = 0; h < s.heads_q; ++h) {
        row.assign(size_t(s.head_dim), 0.0);
        for (int x = 0; x < s.head_dim; ++x) row[size_t(x)] = c.q.get(flat4(q.view(), b, i, h, x));
        rotate(row, c.cached(b) + (s.q_rows_advance() ? i : 0));
        for (int x = 0; x < s.head_dim; ++x) q.set(flat4(q.view(), b, i, h, x), row[size_t(x)]);
      }
    }
    for (int j = 0; j < c.keys(b); ++j) {
      const auto [r, at] = c.slot(b, c.first_key(b) + j);
      for (int h = 0; h < s.heads_kv; ++h) {
        for (int x = 0; x < s.head_dim; ++x)
          k.set(flat4(k.view(), b, j, h, x), e.k_cache[size_t(flat4(kc, r, at, h, x))]);
        for (int x = 0; x < s.head_dim_v; ++x)
          v.set(flat4(v.view(), b, j, h, x), e.v_cache[size_t(flat4(vc, r, at, h, x))]);
      }
    }
  }
  std::vector<int32_t> used(size_t(s.batch));
  for (int b = 0; b < s.batch; ++b) used[size_t(b)] = c.keys(b);
  AttnArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = c.out.view();
  a.seqused_k = {used.data(), int64_t(used.size())};
  a.causal = s.causal;
  a.window_left = s.window_left;
  a.window_right = s.window_right;
  a.softcap = s.softcap;
  if (s.alibi) a.alibi_slopes = c.slopes.view();  // keys counted from first_key: FlashAttention's j
  const Status st = reference::forward_f64(a, &e.attn, opt);
  if (!st.ok()) e.attn = {};
  return e;
}

}  // namespace fastattn::testing
