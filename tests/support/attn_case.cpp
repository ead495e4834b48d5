#include "support/attn_case.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace fastattn::testing {

std::string CaseSpec::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << " b=" << batch << " s_q=" << seqlen_q << " s_k=" << seqlen_k
     << " h_q=" << heads_q << " h_kv=" << heads_kv << " d=" << head_dim << " d_v=" << head_dim_v;
  if (causal) os << " causal";
  if (window_left != -1 || window_right != -1) os << " window=(" << window_left << "," << window_right << ")";
  if (softcap > 0) os << " softcap=" << softcap;
  if (scale == scale) os << " scale=" << scale;
  if (pad) os << " pad=" << pad;
  if (num_splits) os << " splits=" << num_splits;
  auto list = [&](const char* name, const std::vector<int>& v) {
    if (v.empty()) return;
    os << ' ' << name << "=[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << ']';
  };
  list("lens_q", lens_q);
  list("lens_k", lens_k);
  list("used_q", used_q);
  list("used_k", used_k);
  if (nan_past_used) os << " nan_past_used";
  if (nan_keys > 0) os << " nan_keys" << nan_keys;
  if (nan_values > 0) os << " nan_values" << nan_values;
  os << blocks.describe();
  os << bits.describe();
  os << bias.describe();
  if (alibi != 0) os << " alibi" << (alibi == 2 ? "[b,h]" : "[h]") << '[' << alibi_lo << ',' << alibi_hi << ')';
  return os.str();
}

AttnCase make_case(const CaseSpec& spec, Rng& rng) {
  AttnCase c;
  c.spec = spec;
  const DType dt = spec.dtype;
  const int pad = spec.pad;
  if (spec.varlen()) {
    c.spec.batch = int(spec.lens_q.size());
    c.cu_q.assign(1, 0);
    c.cu_k.assign(1, 0);
    for (int n : spec.lens_q) c.cu_q.push_back(c.cu_q.back() + n);
    for (int n : spec.lens_k) c.cu_k.push_back(c.cu_k.back() + n);
    const int64_t tq = c.cu_q.back(), tk = c.cu_k.back();
    c.q = HostTensor(dt, {tq, spec.heads_q, spec.head_dim}, pad);
    c.k = HostTensor(dt, {tk, spec.heads_kv, spec.head_dim}, pad);
    c.v = HostTensor(dt, {tk, spec.heads_kv, spec.head_dim_v}, pad);
    c.out = HostTensor(dt, {tq, spec.heads_q, spec.head_dim_v}, pad);
    c.dout = HostTensor(dt, {tq, spec.heads_q, spec.head_dim_v}, pad);
    c.lse = HostTensor(DType::F32, {spec.heads_q, tq}, pad);
  } else {
    const int64_t b = spec.batch, sq = spec.seqlen_q, sk = spec.seqlen_k;
    c.q = HostTensor(dt, {b, sq, spec.heads_q, spec.head_dim}, pad);
    c.k = HostTensor(dt, {b, sk, spec.heads_kv, spec.head_dim}, pad);
    c.v = HostTensor(dt, {b, sk, spec.heads_kv, spec.head_dim_v}, pad);
    c.out = HostTensor(dt, {b, sq, spec.heads_q, spec.head_dim_v}, pad);
    c.dout = HostTensor(dt, {b, sq, spec.heads_q, spec.head_dim_v}, pad);
    c.lse = HostTensor(DType::F32, {b, spec.heads_q, sq}, pad);
  }
  // Gradients share the shapes (and padding) of their inputs.
  auto like = [&](const HostTensor& t) {
    std::vector<int64_t> shape(t.view().shape, t.view().shape + t.view().ndim);
    return HostTensor(dt, shape, pad);
  };
  c.dq = like(c.q);
  c.dk = like(c.k);
  c.dv = like(c.v);
  c.used_q.assign(spec.used_q.begin(), spec.used_q.end());
  c.used_k.assign(spec.used_k.begin(), spec.used_k.end());

  const float r = spec.input_range;
  c.q.fill_uniform(rng, -r, r);
  c.k.fill_uniform(rng, -r, r);
  c.v.fill_uniform(rng, -r, r);
  c.dout.fill_uniform(rng, -r, r);
  if (spec.nan_past_used) {
    // Rows [used, rows) of each sequence, every head and column.
    auto nan_rows = [&](HostTensor& t, const std::vector<int>& used, const std::vector<int32_t>& cu, int fixed) {
      const Tensor& v = t.view();
      const int64_t row = v.shape[v.ndim - 2] * v.shape[v.ndim - 1];
      auto rows_of = [&](int b) { return cu.empty() ? fixed : cu[b + 1] - cu[b]; };
      for_each_row_past_used(c.spec.batch, used, rows_of, [&](int b, int64_t i) {
        const int64_t first = cu.empty() ? int64_t(b) * fixed : cu[b];
        for (int64_t e = 0; e < row; ++e) t.set((first + i) * row + e, std::numeric_limits<double>::quiet_NaN());
      });
    };
    nan_rows(c.q, spec.used_q, c.cu_q, spec.seqlen_q);
    nan_rows(c.dout, spec.used_q, c.cu_q, spec.seqlen_q);
    nan_rows(c.k, spec.used_k, c.cu_k, spec.seqlen_k);
    nan_rows(c.v, spec.used_k, c.cu_k, spec.seqlen_k);
  }
  // nan_keys / nan_values: one element of k / v set to NaN at each of that many random (sequence, used key,
  // KV head, column).
  auto nan_in_used_keys = [&](HostTensor& t, int count) {
    const Tensor& kv = t.view();
    const int64_t row = kv.shape[kv.ndim - 2] * kv.shape[kv.ndim - 1];  // a key's heads x columns
    for (int n = 0, tries = 0; n < count && tries < 100 * count; ++tries) {
      const int b = rng.uniform_int(0, c.spec.batch - 1);
      const int len = c.cu_k.empty() ? spec.seqlen_k : c.cu_k[size_t(b) + 1] - c.cu_k[size_t(b)];
      const int used = spec.used_k.empty() ? len : std::min(len, spec.used_k[size_t(b)]);
      if (used == 0) continue;
      const int64_t first = c.cu_k.empty() ? int64_t(b) * spec.seqlen_k : c.cu_k[size_t(b)];
      t.set((first + rng.uniform_int(0, used - 1)) * row + rng.uniform_int(0, int(row) - 1),
            std::numeric_limits<double>::quiet_NaN());
      ++n;
    }
  };
  nan_in_used_keys(c.k, spec.nan_keys);
  nan_in_used_keys(c.v, spec.nan_values);
  if (spec.blocks.on) {
    const auto longest = [](const std::vector<int>& lens, int fixed) {
      return lens.empty() ? fixed : *std::max_element(lens.begin(), lens.end());
    };
    c.blocks = make_block_mask(spec.blocks, c.spec.batch, longest(spec.lens_q, spec.seqlen_q),
                               longest(spec.lens_k, spec.seqlen_k), rng);
  }
  if (spec.bits.on) {
    const auto longest = [](const std::vector<int>& lens, int fixed) {
      return lens.empty() ? fixed : *std::max_element(lens.begin(), lens.end());
    };
    c.bits = make_bit_mask(spec.bits, c.spec.batch, longest(spec.lens_q, spec.seqlen_q),
                           longest(spec.lens_k, spec.seqlen_k), rng);
  }
  if (spec.bias.on) {
    const auto longest = [](const std::vector<int>& lens, int fixed) {
      return lens.empty() ? fixed : *std::max_element(lens.begin(), lens.end());
    };
    c.bias = make_bias(spec.bias, c.spec.batch, longest(spec.lens_q, spec.seqlen_q),
                       longest(spec.lens_k, spec.seqlen_k), rng);
    const Tensor& bv = c.bias.view();
    if (spec.bias.grad) c.dbias = HostTensor(DType::F32, {bv.shape[0], bv.shape[1], bv.shape[2], bv.shape[3]});
  }
  if (spec.alibi != 0) {
    c.alibi = spec.alibi == 1 ? HostTensor(DType::F32, {spec.heads_q})
                              : HostTensor(DType::F32, {int64_t(c.spec.batch), spec.heads_q}, spec.alibi_pad);
    c.alibi.fill_uniform(rng, spec.alibi_lo, spec.alibi_hi);
  }
  c.poison_outputs();
  return c;
}

void AttnCase::poison_outputs() {
  for (HostTensor* t : {&out, &lse, &dq, &dk, &dv, &dbias}) t->poison();
}

AttnArgs AttnCase::args(Backend backend) const {
  AttnArgs a;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.out = out.view();
  a.lse = lse.view();
  if (spec.varlen()) {
    a.cu_seqlens_q = {cu_q.data(), int64_t(cu_q.size())};
    a.cu_seqlens_k = {cu_k.data(), int64_t(cu_k.size())};
    for (size_t i = 0; i + 1 < cu_q.size(); ++i) {
      a.max_seqlen_q = std::max(a.max_seqlen_q, cu_q[i + 1] - cu_q[i]);
      a.max_seqlen_k = std::max(a.max_seqlen_k, cu_k[i + 1] - cu_k[i]);
    }
  }
  if (!used_q.empty()) a.seqused_q = {used_q.data(), int64_t(used_q.size())};
  if (!used_k.empty()) a.seqused_k = {used_k.data(), int64_t(used_k.size())};
  a.softmax_scale = spec.scale;
  a.causal = spec.causal;
  a.window_left = spec.window_left;
  a.window_right = spec.window_right;
  a.softcap = spec.softcap;
  a.backend = backend;
  a.num_splits = spec.num_splits;
  if (blocks.defined()) {
    a.mask.kind = MaskKind::BlockSparse;
    a.mask.blocks = blocks.view_at();
  }
  if (bits.defined()) {
    a.mask.kind = MaskKind::DenseBitmask;
    a.mask.bits = bits.view_at();
  }
  if (bias.defined()) a.bias = bias.view();
  if (dbias.view().ndim == 4) a.dbias = dbias.view();
  if (spec.alibi != 0) a.alibi_slopes = alibi.view();
  return a;
}

}  // namespace fastattn::testing
