// One forward test case on the GPU: random inputs, poisoned outputs, the CUDA forward, and every
// element checked against the float64 reference with FA3's tolerance rule
//   max|out - ref| <= 2 * max|baseline - ref| + rounding step of the output dtype,
// where the baseline is the same math in the input precision (P rounded to the dtype before P.V,
// output rounded). LSE is checked against the reference within 1e-4 relative.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/split_forward.h"
#include "util/half.h"
#include "fastattn/fastattn.h"
#include "gpu_buffers.h"
#include "menu_guard.h"
#include "reference/reference.h"
#include "support/attn_case.h"

namespace fastattn::gputest {

// NaN in the rows past seqused (what a caller's padding may hold: uninitialised memory), which no
// result may see and the reference never reads: All, in q (and the backward's dO) past used_q and in k
// and v past used_k. (Since session 46 every kernel zeroes both: no case poisons one side alone.)
enum class NanPast { None, All };

struct FwdCase {
  DType dtype = DType::BF16;
  int batch = 1, sq = 128, sk = 128, hq = 2, hkv = 2, d = 128;
  int dv = 0;  // head dim of v and out (d_v); 0: the same as d
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0.f;
  int row_pad = 0;                       // extra elements per token row of q/k/v (strided inputs)
  int out_pad = 0;                       // extra elements per (token, head) row of out; must stay poisoned
  std::vector<int> lens_q, lens_k;       // varlen when non-empty (batch = lens_q.size())
  std::vector<int> used_q, used_k;       // optional seqused
  // Fixed-length only: key j's row of k is scaled by 1 + key_ramp * (1 - j / sk), so scores grow
  // toward the first keys, which the kernel visits last: a row's running max keeps rising, by more
  // and by less than OnlineSoftmax::kMaxSlack from block to block (both sides of the rescale rule).
  float key_ramp = 0.f;
  // Fixed-length only: keys s_k / 3 and 2 s_k / 3 have their rows of k scaled by key_spike, so the
  // rows whose scores with them are positive see their max jump far past the running max within
  // one block (the deferred max's fallback, OnlineSoftmax::step_deferred).
  float key_spike = 0.f;
  // AttnArgs::num_splits of the GPU call: 1 keeps the unsplit kernels (the configs these tests
  // probe), 0 the heuristic, > 1 split-KV (fwd_split_test.cpp).
  int num_splits = 1;
  bool graph = false;  // capture the GPU call in a CUDA graph and replay it (twice: runs[0], runs[1])
  // Split-KV: one more GPU call with the merge in thread-block clusters turned off (the combine
  // kernel merges); its out and lse must be bitwise runs[0]'s.
  bool same_bits_as_combine_kernel = false;
  // "NAME=VALUE": one more GPU call with the environment variable NAME set to VALUE (a launcher's
  // switch between two schedules that must agree, e.g. FASTATTN_SPLITD_LOCKSTEP=1); its out and lse
  // must be bitwise runs[0]'s. NAME is restored afterwards.
  std::string same_bits_with_env;
  NanPast nan_past = NanPast::None;  // a case with seqused (poison_past_used)
  // NaN into this many elements of k inside the used keys (put_nan_in_used_keys): the rows whose kept
  // keys include one must come out NaN, out and lse, as the reference's; the others as usual.
  int nan_keys = 0;

  int d_v() const { return dv > 0 ? dv : d; }

  std::string str() const {
    // Streamed piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "x" + std::to_string(...)
    // inside a conditional.
    std::ostringstream o;
    o << dtype_name(dtype) << " b" << batch << " sq" << sq << " sk" << sk << " h" << hq << "/" << hkv << " d" << d;
    if (d_v() != d) o << "/" << d_v();
    o << (causal ? " causal" : "") << " win(" << wl << "," << wr << ")" << " softcap" << softcap << " pad" << row_pad
      << " out_pad" << out_pad << (lens_q.empty() ? "" : " varlen");
    if (key_ramp != 0.f) o << " key_ramp" << key_ramp;
    if (key_spike != 0.f) o << " key_spike" << key_spike;
    if (num_splits != 1) o << " splits" << num_splits;
    o << (graph ? " graph" : "") << (same_bits_as_combine_kernel ? " vs-combine-kernel" : "");
    if (!same_bits_with_env.empty()) o << " vs " << same_bits_with_env;
    if (nan_past != NanPast::None)
      o << " nan-past-used";
    if (nan_keys > 0) o << " nan-keys" << nan_keys;
    return o.str();
  }
};

inline uint16_t to_bits(float x, DType dt) { return dt == DType::BF16 ? util::float_to_bf16(x) : util::float_to_half(x); }
inline float from_bits(uint16_t b, DType dt) { return dt == DType::BF16 ? util::bf16_to_float(b) : util::half_to_float(b); }
inline double round_to(double x, DType dt) { return from_bits(to_bits(float(x), dt), dt); }

// Gaps of a strided tensor, in elements: after each (token, head) row of d (the head stride's), after
// each token's heads (the token stride's), after each sequence's tokens (the batch stride's; batched
// layouts only).
struct Pad {
  int head = 0, token = 0, batch = 0;
  bool any() const { return head != 0 || token != 0 || batch != 0; }
  std::string str() const {
    return "(" + std::to_string(head) + "," + std::to_string(token) + "," + std::to_string(batch) + ")";
  }
};

// A (tokens, heads, dim) or (batch, seq, heads, dim) tensor in host memory plus its device twin.
struct TestTensor {
  std::vector<int64_t> shape;
  int64_t row_stride = 0;  // elements between tokens' head rows
  int64_t head_stride = 0, batch_stride = 0;  // batch_stride: 0 for (tokens, heads, dim)
  std::vector<uint16_t> host;
  std::unique_ptr<DeviceBuffer> dev;

  // pad: extra elements after each (token, head) row of d.
  TestTensor(std::vector<int64_t> shp, int pad) : TestTensor(std::move(shp), Pad{pad, 0, 0}) {}
  TestTensor(std::vector<int64_t> shp, Pad pad) : shape(std::move(shp)) {
    const bool batched = shape.size() == 4;
    const int64_t h = shape[shape.size() - 2], d = shape.back(), s = shape[batched ? 1 : 0];
    head_stride = d + pad.head;
    row_stride = h * head_stride + pad.token;
    batch_stride = batched ? s * row_stride + pad.batch : 0;
    const int64_t elems = batched ? shape[0] * batch_stride : s * row_stride;
    host.assign(size_t(std::max<int64_t>(elems, 1)), 0xFFFF);
    dev = std::make_unique<DeviceBuffer>(host.size() * 2);
  }
  Tensor view(void* data, DType dt, Device dv) const {
    Tensor t;
    t.data = data;
    t.ndim = int(shape.size());
    t.dtype = dt;
    t.device = dv;
    for (int i = 0; i < t.ndim; ++i) t.shape[i] = shape[i];
    t.stride[t.ndim - 1] = 1;
    t.stride[t.ndim - 2] = head_stride;
    t.stride[t.ndim - 3] = row_stride;
    if (t.ndim == 4) t.stride[0] = batch_stride;
    return t;
  }
  // Each element's offset in `host`, in the logical (row-major, unpadded) order.
  std::vector<int64_t> offsets() const {
    const bool batched = shape.size() == 4;
    const int64_t b = batched ? shape[0] : 1, s = shape[batched ? 1 : 0], h = shape[shape.size() - 2], d = shape.back();
    std::vector<int64_t> off;
    off.reserve(size_t(b * s * h * d));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t k = 0; k < h; ++k)
          for (int64_t e = 0; e < d; ++e) off.push_back(i * batch_stride + j * row_stride + k * head_stride + e);
    return off;
  }
  // `bits` (a copy of this tensor's storage) in the logical order.
  std::vector<uint16_t> logical(const std::vector<uint16_t>& bits) const {
    std::vector<uint16_t> out;
    for (int64_t o : offsets()) out.push_back(bits[size_t(o)]);
    return out;
  }
  // Elements of `bits` outside the tensor (gaps and the storage's tail) that no longer hold the poison.
  size_t gaps_written(const std::vector<uint16_t>& bits) const {
    std::vector<char> inside(bits.size(), 0);
    for (int64_t o : offsets()) inside[size_t(o)] = 1;
    size_t n = 0;
    for (size_t i = 0; i < bits.size(); ++i) n += !inside[i] && bits[i] != 0xFFFF;
    return n;
  }
};

// A case's sequence index arrays (cu_seqlens, seqused) on the host and on the device, and the
// AttnArgs fields (index arrays, masks, softcap, backend) that point at one copy or the other.
struct CaseIndex {
  bool varlen;
  int batch;
  std::vector<int32_t> cu_q{0}, cu_k{0}, used_q, used_k;
  int max_q = 0, max_k = 0;
  std::unique_ptr<DeviceBuffer> cu_q_dev, cu_k_dev, uq_dev, uk_dev;

  explicit CaseIndex(const FwdCase& c)
      : varlen(!c.lens_q.empty()), batch(varlen ? int(c.lens_q.size()) : c.batch),
        used_q(c.used_q.begin(), c.used_q.end()), used_k(c.used_k.begin(), c.used_k.end()) {
    for (size_t b = 0; b < c.lens_q.size(); ++b) {
      cu_q.push_back(cu_q.back() + c.lens_q[b]);
      cu_k.push_back(cu_k.back() + c.lens_k[b]);
      max_q = std::max(max_q, c.lens_q[b]);
      max_k = std::max(max_k, c.lens_k[b]);
    }
    auto to_device = [](const std::vector<int32_t>& h) {
      auto b = std::make_unique<DeviceBuffer>(std::max<size_t>(h.size(), 1) * 4);
      if (!h.empty()) b->upload(h.data());
      return b;
    };
    cu_q_dev = to_device(cu_q);
    cu_k_dev = to_device(cu_k);
    uq_dev = to_device(used_q);
    uk_dev = to_device(used_k);
  }
  // (batch, s, h, d), or (tokens, h, d) when varlen.
  std::vector<int64_t> shape(int64_t s, int64_t total, int64_t h, int64_t d) const {
    return varlen ? std::vector<int64_t>{total, h, d} : std::vector<int64_t>{batch, s, h, d};
  }
  int64_t total_q(const FwdCase& c) const { return varlen ? cu_q.back() : int64_t(batch) * c.sq; }
  Tensor lse(const FwdCase& c, void* data, Device dv) const {
    return varlen ? make_tensor(data, DType::F32, {c.hq, total_q(c)}, dv)
                  : make_tensor(data, DType::F32, {batch, c.hq, c.sq}, dv);
  }
  void apply(AttnArgs& a, const FwdCase& c, bool on_gpu) const {
    auto pick = [&](const std::unique_ptr<DeviceBuffer>& d, const std::vector<int32_t>& h) {
      return on_gpu ? static_cast<const int32_t*>(d->get()) : h.data();
    };
    if (varlen) {
      a.cu_seqlens_q = {pick(cu_q_dev, cu_q), int64_t(cu_q.size())};
      a.cu_seqlens_k = {pick(cu_k_dev, cu_k), int64_t(cu_k.size())};
      a.max_seqlen_q = max_q;
      a.max_seqlen_k = max_k;
    }
    if (!used_q.empty()) a.seqused_q = {pick(uq_dev, used_q), batch};
    if (!used_k.empty()) a.seqused_k = {pick(uk_dev, used_k), batch};
    a.causal = c.causal;
    a.window_left = c.wl;
    a.window_right = c.wr;
    a.softcap = c.softcap;
    a.backend = on_gpu ? Backend::CUDA : Backend::Reference;
    if (on_gpu) a.num_splits = c.num_splits;
  }
};

// Each element of `t`'s rows past seqused (testing::for_each_row_past_used; cu and used: idx's for
// t's side, fixed_rows its fixed-length rows): fn(offset in t.host). Returns the rows.
template <class Fn>
int64_t for_each_past_used(const TestTensor& t, const CaseIndex& idx, const std::vector<int32_t>& cu,
                           const std::vector<int32_t>& used, int fixed_rows, const Fn& fn) {
  const bool batched = t.shape.size() == 4;
  const int64_t heads = t.shape[t.shape.size() - 2], dim = t.shape.back();
  int64_t rows = 0;
  auto rows_of = [&](int b) { return idx.varlen ? cu[b + 1] - cu[b] : fixed_rows; };
  testing::for_each_row_past_used(idx.batch, used, rows_of, [&](int b, int64_t i) {
    const int64_t row = (batched ? b * t.batch_stride : cu[b] * t.row_stride) + i * t.row_stride;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < dim; ++e) fn(row + h * t.head_stride + e);
    ++rows;
  });
  return rows;
}

// `t`'s rows past seqused set to NaN in its host copy, and uploaded. Returns the rows.
inline int64_t poison_rows_past_used(TestTensor& t, const CaseIndex& idx, const std::vector<int32_t>& cu,
                                     const std::vector<int32_t>& used, int fixed_rows, DType dt) {
  const uint16_t nan = to_bits(std::numeric_limits<float>::quiet_NaN(), dt);
  const int64_t rows = for_each_past_used(t, idx, cu, used, fixed_rows, [&](int64_t o) { t.host[size_t(o)] = nan; });
  t.dev->upload(t.host.data());
  return rows;
}

// FwdCase::nan_past into q, k and v; the case must have rows past seqused to poison.
inline void poison_past_used(const FwdCase& c, const CaseIndex& idx, TestTensor& q, TestTensor& k, TestTensor& v) {
  if (c.nan_past == NanPast::None) return;
  int64_t rows = poison_rows_past_used(k, idx, idx.cu_k, idx.used_k, c.sk, c.dtype);
  poison_rows_past_used(v, idx, idx.cu_k, idx.used_k, c.sk, c.dtype);
  rows += poison_rows_past_used(q, idx, idx.cu_q, idx.used_q, c.sq, c.dtype);
  EXPECT_GT(rows, 0) << "nan_past: no row past seqused to poison";
}

// FwdCase::nan_keys: one element of k set to NaN at each of that many random (sequence, used key, KV head,
// column), in k's host copy, then uploaded (a sequence without used keys is skipped).
inline void put_nan_in_used_keys(const FwdCase& c, const CaseIndex& idx, TestTensor& k, std::mt19937& rng) {
  if (c.nan_keys == 0) return;
  const uint16_t nan = to_bits(std::numeric_limits<float>::quiet_NaN(), c.dtype);
  for (int n = 0, tries = 0; n < c.nan_keys && tries < 100 * c.nan_keys; ++tries) {
    const int b = int(rng() % uint32_t(idx.batch));
    const int len = idx.varlen ? idx.cu_k[b + 1] - idx.cu_k[b] : c.sk;
    const int used = idx.used_k.empty() ? len : std::min(len, idx.used_k[size_t(b)]);
    if (used == 0) continue;
    const int64_t j = rng() % uint32_t(used), h = rng() % uint32_t(c.hkv), e = rng() % uint32_t(c.d);
    const int64_t row = idx.varlen ? (idx.cu_k[b] + j) * k.row_stride : b * k.batch_stride + j * k.row_stride;
    k.host[size_t(row + h * k.head_stride + e)] = nan;
    ++n;
  }
  k.dev->upload(k.host.data());
}

// The NanInUsedKeys tests' fixed-length case (sm90, sm80): GQA 4 / 2 over two sequences, s_q < s_k, one NaN key.
// Causal or not, the last row keeps every key, so some row meets the NaN key and the other sequence none.
// Without causal, seqused_q too: the rows past it (zero-filled Q, which still meets the NaN key) stay exactly 0
// (check_out_zero_past_used). Causal keeps every row, so that the NaN key always has a reader.
inline FwdCase nan_key_case(DType dt, int d, bool causal) {
  FwdCase c;
  c.dtype = dt;
  c.d = d;
  c.sq = 300;
  c.sk = 400;
  c.batch = 2;
  c.hq = 4;
  c.hkv = 2;
  c.causal = causal;
  if (!causal) c.used_q = {300, 251};
  c.nan_keys = 1;
  return c;
}

// out's rows past seqused_q (`got`: out's storage): every element exactly 0, whatever q holds there.
inline void check_out_zero_past_used(const std::vector<uint16_t>& got, const TestTensor& out, const FwdCase& c,
                                     const CaseIndex& idx) {
  size_t nonzero = 0;
  for_each_past_used(out, idx, idx.cu_q, idx.used_q, c.sq,
                     [&](int64_t o) { nonzero += from_bits(got[size_t(o)], c.dtype) != 0.0; });
  EXPECT_EQ(nonzero, 0u) << "elements of out's rows past seqused_q are not 0";
}

// The gaps of a backward case's eight tensors (none: the contiguous layout). q, k, v and dout are loaded
// with TMA: their strides must stay 16-byte multiples; the others are stored by the kernels.
struct BwdPads {
  Pad q, k, v, out, dout, dq, dk, dv;
  bool any() const {
    return q.any() || k.any() || v.any() || out.any() || dout.any() || dq.any() || dk.any() || dv.any();
  }
  std::string str() const {
    return " pads q" + q.str() + " k" + k.str() + " v" + v.str() + " out" + out.str() + " dout" + dout.str() + " dq" +
           dq.str() + " dk" + dk.str() + " dv" + dv.str();
  }
};

// A backward case's eight tensors in CaseIndex's layout (batched, or packed when varlen), with the gaps of
// `pads`: q, k, v and dO drawn from N(0, 1) with `rng` (element by element in the logical order; their
// gaps hold 0xFFFF, NaN, so that a read of a gap poisons the results) and uploaded; out's and the
// gradients' host copies hold 0xFFFF, their device buffers are left as allocated (the caller poisons
// them: DeviceBuffer::poison).
struct BwdTensors {
  TestTensor q, k, v, out, dout, dq, dk, dv;
  BwdTensors(const FwdCase& c, const CaseIndex& idx, std::mt19937& rng, const BwdPads& p = {})
      : q(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d), p.q), k(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d), p.k),
        v(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d_v()), p.v),
        out(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d_v()), p.out),
        dout(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d_v()), p.dout),
        dq(idx.shape(c.sq, idx.cu_q.back(), c.hq, c.d), p.dq), dk(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d), p.dk),
        dv(idx.shape(c.sk, idx.cu_k.back(), c.hkv, c.d_v()), p.dv) {
    std::normal_distribution<float> normal(0.f, 1.f);
    for (TestTensor* t : {&q, &k, &v, &dout}) {
      for (int64_t o : t->offsets()) t->host[size_t(o)] = to_bits(normal(rng), c.dtype);
      t->dev->upload(t->host.data());
    }
  }
};

struct FwdOutputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// out in its row-padded layout (c.d_v() + c.out_pad elements a row, the padding poisoned 0xFFFF)
// against the float64 reference `ref` with FA3's rule (`base`: the same math with P in the input
// dtype): every element written and finite, the error at most 2 x the baseline's + one ulp at the
// reference's max, the padding untouched. ref and base are contiguous in out's logical shape.
inline void check_out(const std::vector<uint16_t>& got, const std::vector<double>& ref, const std::vector<double>& base,
                      const FwdCase& c) {
  const int dv = c.d_v();
  const int64_t rows = int64_t(got.size()) / (dv + c.out_pad);
  ASSERT_EQ(int64_t(ref.size()), rows * dv);
  double err = 0, base_err = 0, ref_max = 0;
  size_t bad_nan = 0, pad_written = 0;
  for (int64_t row = 0; row < rows; ++row) {
    for (int col = 0; col < dv + c.out_pad; ++col) {
      const uint16_t bits = got[size_t(row * (dv + c.out_pad) + col)];
      if (col >= dv) {
        pad_written += bits != 0xFFFF;
        continue;
      }
      const size_t i = size_t(row * dv + col);
      const double g = from_bits(bits, c.dtype);
      if (std::isnan(ref[i])) {  // a NaN among the row's kept scores (FwdCase::nan_keys): NaN out
        bad_nan += !std::isnan(g);
        continue;
      }
      if (!std::isfinite(g)) {
        ++bad_nan;
        continue;
      }
      err = std::max(err, std::abs(g - ref[i]));
      base_err = std::max(base_err, std::abs(round_to(base[i], c.dtype) - ref[i]));
      ref_max = std::max(ref_max, std::abs(ref[i]));
    }
  }
  EXPECT_EQ(pad_written, 0u) << "elements of out's row padding were written";
  EXPECT_EQ(bad_nan, 0u) << "elements of out not written, not finite, or not NaN where the reference's are";
  const double step = ref_max * (c.dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048);  // one ulp at the max
  EXPECT_LE(err, 2 * base_err + step) << "out error " << err << " baseline error " << base_err;
}

// lse against the float64 reference: -inf exactly where the reference's is, elsewhere finite within
// 1e-4 relative. Returns how many rows the reference has at -inf (rows that keep no key).
inline size_t check_lse(const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(ref.size(), got.size());
  double lse_err = 0;
  size_t lse_bad = 0, masked_rows = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    if (std::isnan(r)) {  // FwdCase::nan_keys
      lse_bad += !std::isnan(g);
      continue;
    }
    if (std::isinf(r) && r < 0) {
      ++masked_rows;
      lse_bad += !(std::isinf(g) && g < 0);
      continue;
    }
    if (!std::isfinite(g)) {
      ++lse_bad;
      continue;
    }
    lse_err = std::max(lse_err, std::abs(g - r) / std::max(1.0, std::abs(r)));
  }
  EXPECT_EQ(lse_bad, 0u) << "lse elements wrong in kind (unwritten, NaN or -inf where the reference's is not, or not)";
  EXPECT_LE(lse_err, 1e-4) << "lse relative error";
  return masked_rows;
}

// `extra`, when given, adds to every call's args what the case type holds beyond FwdCase (e.g. a
// bias: fwd_bias_test.cpp), for the GPU call (on_gpu) and the host reference alike.
using ExtraArgs = std::function<void(AttnArgs&, bool on_gpu)>;

inline void run_fwd_case(const FwdCase& c, const ExtraArgs& extra = {}) {
  if (!case_in_menu(cuda_backend::KernelFamily::Forward, c.dtype, c.d, c.d_v())) return;
  const auto seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE("case " + c.str() + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const CaseIndex idx(c);
  const bool varlen = idx.varlen;
  const std::vector<int32_t>&cu_q = idx.cu_q, &cu_k = idx.cu_k;
  auto shape_of = [&](int64_t s, int64_t total, int64_t h, int64_t d) { return idx.shape(s, total, h, d); };
  TestTensor q(shape_of(c.sq, cu_q.back(), c.hq, c.d), c.row_pad);
  TestTensor k(shape_of(c.sk, cu_k.back(), c.hkv, c.d), c.row_pad);
  TestTensor v(shape_of(c.sk, cu_k.back(), c.hkv, c.d_v()), c.row_pad);
  TestTensor out(shape_of(c.sq, cu_q.back(), c.hq, c.d_v()), c.out_pad);
  for (TestTensor* t : {&q, &k, &v}) {
    for (auto& x : t->host) x = to_bits(normal(rng), c.dtype);
    t->dev->upload(t->host.data());
  }
  // Key j's row of k (every head) times factor(j): fixed-length cases only.
  auto scale_keys = [&](auto factor) {
    EXPECT_FALSE(varlen) << "key_ramp and key_spike are for fixed-length cases";
    for (size_t i = 0; i < k.host.size(); ++i) {
      const int j = int(int64_t(i) / k.row_stride % c.sk);
      k.host[i] = to_bits(from_bits(k.host[i], c.dtype) * factor(j), c.dtype);
    }
    k.dev->upload(k.host.data());
  };
  if (c.key_ramp != 0.f) scale_keys([&](int j) { return 1.f + c.key_ramp * (1.f - float(j) / c.sk); });
  if (c.key_spike != 0.f)
    scale_keys([&](int j) { return j == c.sk / 3 || j == 2 * c.sk / 3 ? c.key_spike : 1.f; });
  poison_past_used(c, idx, q, k, v);
  put_nan_in_used_keys(c, idx, k, rng);
  const int64_t total_q = idx.total_q(c);
  const size_t lse_n = size_t(std::max<int64_t>(int64_t(c.hq) * total_q, 1));
  DeviceBuffer lse_dev(lse_n * 4);

  auto make_args = [&](bool on_gpu, void* qd, void* kd, void* vd, void* od, void* ld) {
    const Device dv = on_gpu ? Device::CUDA : Device::CPU;
    AttnArgs a;
    a.q = q.view(qd, c.dtype, dv);
    a.k = k.view(kd, c.dtype, dv);
    a.v = v.view(vd, c.dtype, dv);
    a.out = out.view(od, c.dtype, dv);
    a.lse = idx.lse(c, ld, dv);
    idx.apply(a, c, on_gpu);
    if (extra) extra(a, on_gpu);
    return a;
  };

  // Two GPU runs into freshly poisoned outputs: the second must match the first bit for bit. With
  // c.graph, the call is captured once (index arrays unread on the host) and each run is a replay.
  FwdOutputs runs[2];
  CapturedCall graph;
  if (c.graph) {
    AttnArgs a = make_args(true, q.dev->get(), k.dev->get(), v.dev->get(), out.dev->get(), lse_dev.get());
    a.check_index_arrays = false;
    const std::string err = graph.capture([&](cudaStream_t s) { return forward(a, s); });
    ASSERT_TRUE(err.empty()) << err;
  }
  for (auto& r : runs) {
    out.dev->poison();
    lse_dev.poison();
    if (c.graph) {
      FA_CUDA_OK(graph.replay());
    } else {
      AttnArgs a = make_args(true, q.dev->get(), k.dev->get(), v.dev->get(), out.dev->get(), lse_dev.get());
      Status st = forward(a, nullptr);
      ASSERT_TRUE(st.ok()) << st.message;
    }
    FA_CUDA_OK(cudaDeviceSynchronize());
    r.out.resize(out.host.size());
    r.lse.resize(lse_n);
    out.dev->download(r.out.data());
    lse_dev.download(r.lse.data());
  }
  ASSERT_EQ(std::memcmp(runs[0].out.data(), runs[1].out.data(), runs[0].out.size() * 2), 0) << "out differs between runs (race?)";
  ASSERT_EQ(std::memcmp(runs[0].lse.data(), runs[1].lse.data(), runs[0].lse.size() * 4), 0) << "lse differs between runs";
  // One more eager GPU call into outputs filled with `fill` (0xFF: the NaN poison), `around` wrapping the call
  // (a switch turned on and back off); its out and lse must be runs[0]'s bit for bit.
  auto same_bits_again = [&](const char* what, unsigned char fill, const std::function<Status(void)>& around) {
    FA_CUDA_OK(cudaMemset(out.dev->get(), fill, out.dev->bytes()));
    FA_CUDA_OK(cudaMemset(lse_dev.get(), fill, lse_dev.bytes()));
    const Status st = around();
    ASSERT_TRUE(st.ok()) << what << ": " << st.message;
    FA_CUDA_OK(cudaDeviceSynchronize());
    FwdOutputs other;
    other.out.resize(out.host.size());
    other.lse.resize(lse_n);
    out.dev->download(other.out.data());
    lse_dev.download(other.lse.data());
    // Under the NaN poison the whole storage (out's row padding must stay poisoned too), else out's elements.
    const std::vector<uint16_t> a0 = fill == 0xFF ? runs[0].out : out.logical(runs[0].out);
    const std::vector<uint16_t> b0 = fill == 0xFF ? other.out : out.logical(other.out);
    EXPECT_EQ(std::memcmp(a0.data(), b0.data(), a0.size() * 2), 0) << "out differs: " << what;
    EXPECT_EQ(std::memcmp(runs[0].lse.data(), other.lse.data(), lse_n * 4), 0) << "lse differs: " << what;
  };
  auto gpu_call = [&] {
    AttnArgs a = make_args(true, q.dev->get(), k.dev->get(), v.dev->get(), out.dev->get(), lse_dev.get());
    return forward(a, nullptr);
  };
  if (c.same_bits_as_combine_kernel) {
    same_bits_again("cluster merge != combine kernel", 0xFF, [&] {
      cuda_backend::set_cluster_merge_allowed(false);
      const Status st = gpu_call();
      cuda_backend::set_cluster_merge_allowed(true);
      return st;
    });
  }

  if (!c.same_bits_with_env.empty()) {
    const size_t eq = c.same_bits_with_env.find('=');
    ASSERT_NE(eq, std::string::npos) << c.same_bits_with_env;
    const std::string name = c.same_bits_with_env.substr(0, eq), value = c.same_bits_with_env.substr(eq + 1);
    const char* was = std::getenv(name.c_str());
    const std::string saved = was != nullptr ? was : "";
    same_bits_again(("under " + c.same_bits_with_env).c_str(), 0xFF, [&] {
      setenv(name.c_str(), value.c_str(), 1);
      const Status st = gpu_call();
      if (was != nullptr)
        setenv(name.c_str(), saved.c_str(), 1);
      else
        unsetenv(name.c_str());
      return st;
    });
  }

  // Reference (float64) and baseline (P rounded to the input dtype) on host copies.
  std::vector<uint16_t> out_host(out.host.size());
  std::vector<float> lse_host(lse_n);
  AttnArgs ha = make_args(false, q.host.data(), k.host.data(), v.host.data(), out_host.data(), lse_host.data());
  reference::ForwardF64 ref, base;
  Status st = reference::forward_f64(ha, &ref);
  ASSERT_TRUE(st.ok()) << st.message;
  reference::Options low;
  low.round_p_to_input_dtype = true;
  ASSERT_TRUE(reference::forward_f64(ha, &base, low).ok());

  // Compare: ref/base are contiguous in out's logical shape; ours has out's (row-padded) layout,
  // whose padding must still hold the poison.
  check_out(runs[0].out, ref.out, base.out, c);
  check_lse(runs[0].lse, ref.lse);
  check_out_zero_past_used(runs[0].out, out, c, idx);
  if (c.nan_keys > 0) {
    // The case means something only with NaN rows and clean rows both; and since the poison is NaN, the
    // NaN rows must also come out of a call into zeroed outputs (written, not left): bitwise runs[0].
    const auto nan_rows = std::count_if(ref.lse.begin(), ref.lse.end(), [](double x) { return std::isnan(x); });
    EXPECT_GT(nan_rows, 0) << "nan_keys: no row of the reference meets a NaN key";
    EXPECT_LT(size_t(nan_rows), ref.lse.size()) << "nan_keys: every row meets a NaN key";
    same_bits_again("nan_keys: into zeroed outputs", 0x00, gpu_call);
  }
}

}  // namespace fastattn::gputest
