// ALiBi (AttnArgs::alibi_slopes) on the Hopper forward: the bias kernels with the term -slope |i + s_k - s_q - j|
// computed (sm90/fwd/mainloop.cuh, add_bias) against the float64 reference (reference/score_row.h): inputs and
// slopes drawn fresh, out poisoned, every element and LSE checked with FA3's rule (fwd_case.h), two runs
// bitwise equal. d 64 / 96 / 128 in both dtypes, full and causal, odd lengths 1 / 17 / 113 / 4097, s_q != s_k
// both ways, windows, GQA, varlen with an empty sequence and seqused, one slope a head or a (batch, head) with a
// padded batch stride, steep slopes, a CUDA graph, the plain and generic loop bodies; and the refusals by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fwd_case.h"
#include "random_masks.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdAlibi : public HopperTest {};

struct AlibiCase {
  FwdCase c;
  bool per_batch = false;        // (batch, heads_q) slopes, else (heads_q)
  int batch_pad = 0;             // extra floats after each batch entry's slopes (2-D only)
  float lo = 0.01f, hi = 1.f;    // slopes uniform in [lo, hi)

  std::string str() const {
    return c.str() + " alibi " + (per_batch ? "(b,h)" : "(h)") + " pad" + std::to_string(batch_pad) + " [" +
           std::to_string(lo) + "," + std::to_string(hi) + ")";
  }
};

// `more`: further arguments of the call (a mask), on the GPU or for the reference.
void run_alibi_case(const AlibiCase& ac, const std::function<void(AttnArgs&, bool)>& more = {}) {
  const uint32_t seed = uint32_t(std::random_device{}());
  SCOPED_TRACE(ac.str() + " slope seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const CaseIndex idx(ac.c);
  const int64_t row = ac.c.hq + (ac.per_batch ? ac.batch_pad : 0), rows = ac.per_batch ? idx.batch : 1;
  std::vector<float> host(size_t(row * rows), NAN);  // padding NaN: never read
  std::uniform_real_distribution<float> u(ac.lo, ac.hi);
  for (int64_t b = 0; b < rows; ++b)
    for (int h = 0; h < ac.c.hq; ++h) host[size_t(b * row + h)] = u(rng);
  DeviceBuffer dev(host.size() * 4);
  dev.upload(host.data());
  run_fwd_case(ac.c, [&](AttnArgs& a, bool on_gpu) {
    void* data = on_gpu ? dev.get() : static_cast<void*>(host.data());
    const Device where = on_gpu ? Device::CUDA : Device::CPU;
    a.alibi_slopes = ac.per_batch ? make_tensor(data, DType::F32, {rows, int64_t(ac.c.hq)}, where)
                                  : make_tensor(data, DType::F32, {int64_t(ac.c.hq)}, where);
    if (ac.per_batch) a.alibi_slopes.stride[0] = row;
    if (more) more(a, on_gpu);
  });
}

AlibiCase alibi_case(DType dt, int d, int sq, int sk, int hq, int hkv, int batch = 2) {
  AlibiCase a;
  a.c.dtype = dt;
  a.c.d = d;
  a.c.sq = sq;
  a.c.sk = sk;
  a.c.hq = hq;
  a.c.hkv = hkv;
  a.c.batch = batch;
  return a;
}

TEST_F(Sm90FwdAlibi, HeadDimsAndDtypes) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int d : {128, 64, 96}) {
      AlibiCase a = alibi_case(dt, d, 500, 900, 4, 4);
      run_alibi_case(a);
      a.c.causal = true;
      a.c.sk = 500;
      run_alibi_case(a);
    }
}

TEST_F(Sm90FwdAlibi, OddLengthsBothWays) {
  for (int sq : {1, 17, 113})
    for (int sk : {1, 17, 113, 4097}) {
      AlibiCase a = alibi_case(DType::BF16, 128, sq, sk, 2, 1);
      a.c.causal = sq <= sk && sk != 4097;
      run_alibi_case(a);
    }
  run_alibi_case(alibi_case(DType::BF16, 128, 4097, 300, 2, 2, 1));  // s_q > s_k: negative diagonal offset
  AlibiCase c = alibi_case(DType::F16, 64, 4097, 300, 2, 2, 1);
  c.c.causal = true;  // rows above the diagonal offset keep nothing: out 0, lse -inf
  run_alibi_case(c);
}

// Slopes per (batch entry, head) with a padded batch stride, GQA 1 / 4 / 8, softcap, local windows.
TEST_F(Sm90FwdAlibi, PerBatchSlopesGqaSoftcapWindows) {
  for (int hkv : {8, 2, 1}) {
    AlibiCase a = alibi_case(DType::BF16, 128, 300, 400, 8, hkv, 3);
    a.per_batch = true;
    a.batch_pad = 5;
    run_alibi_case(a);
  }
  AlibiCase cap = alibi_case(DType::BF16, 128, 300, 500, 4, 2);  // the term after softcap (its scale-1 path)
  cap.c.softcap = 20.f;
  run_alibi_case(cap);
  AlibiCase w = alibi_case(DType::BF16, 128, 700, 900, 4, 2);
  w.c.wl = 100;
  w.c.wr = 30;
  run_alibi_case(w);
  w.c.d = 64;
  w.c.wl = 0;
  w.c.wr = 200;
  run_alibi_case(w);
}

TEST_F(Sm90FwdAlibi, VarlenEmptySequenceAndSeqused) {
  AlibiCase a = alibi_case(DType::BF16, 128, 0, 0, 4, 2);
  a.c.lens_q = {17, 0, 300, 129, 1};
  a.c.lens_k = {40, 5, 300, 600, 1};
  a.per_batch = true;
  run_alibi_case(a);
  a.c.causal = true;
  a.c.used_q = {17, 0, 250, 100, 1};
  a.c.used_k = {30, 0, 300, 401, 1};
  run_alibi_case(a);
  a.per_batch = false;
  a.c.d = 64;
  run_alibi_case(a);
  a.c.nan_past = NanPast::All;  // NaN in q, k, v past seqused: out 0 there, no other row touched
  run_alibi_case(a);
}

// Steep slopes in [0.5, 8) (FlashAttention's usual slopes 2^(-8 h / heads) are <= 0.5; far keys' terms reach -32k
// and underflow in exp), a key spike (the deferred max's fallback), a CUDA graph, every block in the generic body.
TEST_F(Sm90FwdAlibi, SteepSlopesGraphAndGenericBody) {
  AlibiCase a = alibi_case(DType::BF16, 128, 1000, 4097, 4, 4, 1);
  a.lo = 0.5f;
  a.hi = 8.f;
  run_alibi_case(a);
  AlibiCase s = alibi_case(DType::BF16, 128, 512, 1024, 2, 2, 1);
  s.c.key_spike = 6.f;
  run_alibi_case(s);
  AlibiCase g = alibi_case(DType::F16, 128, 333, 777, 4, 2);
  g.c.graph = true;
  run_alibi_case(g);
  ::setenv("FASTATTN_BIAS_PLAIN", "0", 1);
  AlibiCase p = alibi_case(DType::BF16, 128, 640, 900, 2, 2);
  run_alibi_case(p);
  p.c.causal = true;
  p.c.d = 64;
  run_alibi_case(p);
  ::unsetenv("FASTATTN_BIAS_PLAIN");
}

// ALiBi with a block-sparse mask or a bitmask: the term computed in those kernels' bias twins (the shared add_bias
// branch; empty blocks skipped, partial ones masked after the term). Random kept 128 x 128 blocks (one mask for
// every batch entry and head) or random bits (per batch entry and KV head), causal too, d 128 and 64 (the
// three-warpgroup twins).
TEST_F(Sm90FwdAlibi, WithBlockSparseAndBitmask) {
  for (int d : {128, 64})
    for (int kind = 0; kind < 2; ++kind)
      for (bool causal : {false, true}) {
        AlibiCase ac = alibi_case(DType::BF16, d, causal ? 900 : 700, 900, 4, 2);
        ac.c.causal = causal;
        ac.per_batch = kind == 1;
        SCOPED_TRACE(kind == 0 ? "block-sparse" : "bitmask");
        std::mt19937 rng(uint32_t(std::random_device{}()));
        const CaseIndex idx(ac.c);
        const RandomMasks masks(rng, idx.batch, ac.c.hkv, ac.c.sq, ac.c.sk);
        run_alibi_case(ac, [&](AttnArgs& a, bool on_gpu) { masks.apply(a, on_gpu, kind); });
      }
}

// What the CUDA forward refuses with ALiBi, by name (cuda/bias_rule.cpp, alibi_rules).
TEST_F(Sm90FwdAlibi, Refusals) {
  for (int d : {128, 256}) {
    FwdCase c = alibi_case(DType::BF16, d, 64, 64, 2, 2).c;
    const CaseIndex idx(c);
    TestTensor q(idx.shape(c.sq, 0, c.hq, c.d), 0), k(idx.shape(c.sk, 0, c.hkv, c.d), 0),
        v(idx.shape(c.sk, 0, c.hkv, c.d), 0), out(idx.shape(c.sq, 0, c.hq, c.d), 0);
    DeviceBuffer slopes(64), bias(size_t(2 * 64 * 64 * 2));
    AttnArgs a;
    a.q = q.view(q.dev->get(), c.dtype, Device::CUDA);
    a.k = k.view(k.dev->get(), c.dtype, Device::CUDA);
    a.v = v.view(v.dev->get(), c.dtype, Device::CUDA);
    a.out = out.view(out.dev->get(), c.dtype, Device::CUDA);
    a.alibi_slopes = make_tensor(slopes.get(), DType::F32, {2}, Device::CUDA);
    auto refused = [&](const AttnArgs& x, const char* part) {
      const Status st = forward(x, nullptr);
      EXPECT_EQ(st.code, Code::NotSupported) << part;
      EXPECT_NE(st.message.find(part), std::string::npos) << st.message;
    };
    if (d == 256) {
      refused(a, "alibi_slopes: the CUDA forward with ALiBi takes head dims up to 128");
      continue;
    }
    AttnArgs both = a;
    both.bias = make_tensor(bias.get(), DType::BF16, {1, 2, 64, 64}, Device::CUDA);
    refused(both, "alibi_slopes: the CUDA forward takes ALiBi or a bias, not both");
    AttnArgs split = a;
    split.num_splits = 2;
    refused(split, "the CUDA forward with ALiBi has no split-KV");
    AttnArgs wrong = a;
    wrong.alibi_slopes.dtype = DType::BF16;
    const Status st = forward(wrong, nullptr);
    EXPECT_EQ(st.code, Code::InvalidArgument);
    EXPECT_NE(st.message.find("alibi_slopes: dtype bf16"), std::string::npos) << st.message;
  }
}

}  // namespace
}  // namespace fastattn::gputest
