// The float64 reference against closed forms:
//  * identical keys: every kept score of a row is equal, so out = mean of the kept V rows and
//    lse = s + log(#kept);
//  * two-valued ("one-hot") scores: q_i = a e_{t(i)}, k_j = e_j, so row i scores a at key t(i)
//    and 0 elsewhere: out = (e^a v_t + sum_{j != t} v_j) / (e^a + n - 1), lse = log(e^a + n - 1).
#include <gtest/gtest.h>

#include <cmath>

#include "reference/mask_oracle.h"
#include "reference/reference.h"
#include "support/attn_case.h"

namespace fastattn::testing {
namespace {

struct MaskCase {
  const char* name;
  bool causal;
  int left, right;
};

class UniformKeys : public ::testing::TestWithParam<MaskCase> {};

TEST_P(UniformKeys, OutIsMeanOfKeptValues) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  CaseSpec spec;
  spec.batch = 2;
  spec.seqlen_q = 9;
  spec.seqlen_k = 13;
  spec.heads_q = 4;
  spec.heads_kv = 2;
  spec.head_dim = 8;
  spec.head_dim_v = 5;
  spec.causal = GetParam().causal;
  spec.window_left = GetParam().left;
  spec.window_right = GetParam().right;
  spec.softcap = rng.uniform_int(0, 1) ? 2.0f : 0.0f;
  AttnCase c = make_case(spec, rng);
  // One key vector per (batch, kv head), copied to every position.
  const int64_t d = spec.head_dim, hkv = spec.heads_kv, sk = spec.seqlen_k;
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t j = 0; j < sk; ++j) {
      for (int64_t h = 0; h < hkv; ++h) {
        for (int64_t x = 0; x < d; ++x) c.k.set(((b * sk + j) * hkv + h) * d + x, c.k.get(((b * sk) * hkv + h) * d + x));
      }
    }
  }
  reference::ForwardF64 r;
  ASSERT_TRUE(reference::forward_f64(c.args(Backend::Reference), &r).ok());

  const int window_right = spec.causal ? 0 : spec.window_right;
  const reference::MaskRule rule{spec.seqlen_q, spec.seqlen_k, spec.window_left, window_right};
  const int64_t hq = spec.heads_q, dv = spec.head_dim_v, sq = spec.seqlen_q;
  const double scale = double(float(1.0 / std::sqrt(double(d))));  // the scale is a float argument
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t hk = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        double x = 0;
        for (int64_t c0 = 0; c0 < d; ++c0) {
          x += c.q.get(((b * sq + i) * hq + h) * d + c0) * c.k.get(((b * sk) * hkv + hk) * d + c0);
        }
        x *= scale;
        const double s = spec.softcap > 0 ? spec.softcap * std::tanh(x / spec.softcap) : x;
        int n = 0;
        std::vector<double> mean(size_t(dv), 0.0);
        for (int64_t j = 0; j < sk; ++j) {
          if (!reference::keep(rule, i, j)) continue;
          ++n;
          for (int64_t y = 0; y < dv; ++y) mean[size_t(y)] += c.v.get(((b * sk + j) * hkv + hk) * dv + y);
        }
        const double lse = r.lse[size_t((b * hq + h) * sq + i)];
        if (n == 0) {
          EXPECT_EQ(lse, -INFINITY) << "seed " << seed;
        } else {
          EXPECT_NEAR(lse, s + std::log(double(n)), 1e-12) << seed_note(seed);
        }
        for (int64_t y = 0; y < dv; ++y) {
          const double expect = n ? mean[size_t(y)] / n : 0.0;
          EXPECT_NEAR(r.out[size_t(((b * sq + i) * hq + h) * dv + y)], expect, 1e-12)
              << "b " << b << " h " << h << " i " << i << "; " << seed_note(seed);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, UniformKeys,
                         ::testing::Values(MaskCase{"none", false, -1, -1}, MaskCase{"causal", true, -1, -1},
                                           MaskCase{"local", false, 2, 3}, MaskCase{"causal_local", true, 4, -1}),
                         [](const ::testing::TestParamInfo<MaskCase>& p) { return std::string(p.param.name); });

TEST(OneHotScores, OutAndLseMatchTwoValuedSoftmax) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    CaseSpec spec;
    spec.seqlen_q = 6;
    spec.seqlen_k = 8;
    spec.head_dim = 8;  // = s_k: key j is the unit vector e_j
    spec.head_dim_v = 3;
    spec.dtype = dt;
    spec.scale = 1.0f;
    AttnCase c = make_case(spec, rng);
    const double a = 4.0;  // exactly representable in every dtype
    std::vector<int> target(6);
    for (int i = 0; i < 6; ++i) {
      target[size_t(i)] = rng.uniform_int(0, 7);
      for (int x = 0; x < 8; ++x) c.q.set(i * 8 + x, x == target[size_t(i)] ? a : 0.0);
    }
    for (int j = 0; j < 8; ++j) {
      for (int x = 0; x < 8; ++x) c.k.set(j * 8 + x, x == j ? 1.0 : 0.0);
    }
    reference::ForwardF64 r;
    ASSERT_TRUE(reference::forward_f64(c.args(Backend::Reference), &r).ok());
    const double ea = std::exp(a), denom = ea + 7;
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(r.lse[size_t(i)], std::log(denom), 1e-13);
      for (int y = 0; y < 3; ++y) {
        double num = 0;
        for (int j = 0; j < 8; ++j) num += (j == target[size_t(i)] ? ea : 1.0) * c.v.get(j * 3 + y);
        EXPECT_NEAR(r.out[size_t(i * 3 + y)], num / denom, 1e-13) << dtype_name(dt) << "; " << seed_note(seed);
      }
    }
  }
}

TEST(ReferenceWrites, TensorsMatchFloat64Results) {
  // reference::forward / backward write the float64 results, rounded, into every element.
  const uint64_t seed = test_seed();
  Rng rng(seed);
  CaseSpec spec;
  spec.lens_q = {5, 0, 9};
  spec.lens_k = {7, 3, 9};
  spec.heads_q = 2;
  spec.dtype = DType::BF16;
  spec.pad = 2;
  spec.causal = true;
  AttnCase c = make_case(spec, rng);
  ASSERT_TRUE(reference::forward(c.args(Backend::Reference)).ok());
  ASSERT_TRUE(reference::backward(c.args(Backend::Reference), c.dout.view(), c.dq.view(), c.dk.view(), c.dv.view()).ok());
  reference::ForwardF64 f;
  reference::BackwardF64 g;
  ASSERT_TRUE(reference::forward_f64(c.args(Backend::Reference), &f).ok());
  ASSERT_TRUE(reference::backward_f64(c.args(Backend::Reference), c.dout.view(), &g).ok());
  auto expect_rounded = [&](const HostTensor& t, const std::vector<double>& v, const char* name) {
    ASSERT_EQ(size_t(t.numel()), v.size());
    EXPECT_TRUE(t.padding_poisoned()) << name;
    for (int64_t i = 0; i < t.numel(); ++i) {
      HostTensor one(t.dtype(), {1});
      one.set(0, v[size_t(i)]);
      ASSERT_EQ(t.get(i), one.get(0)) << name << " element " << i << "; " << seed_note(seed);
    }
  };
  expect_rounded(c.out, f.out, "out");
  expect_rounded(c.lse, f.lse, "lse");
  expect_rounded(c.dq, g.dq, "dq");
  expect_rounded(c.dk, g.dk, "dk");
  expect_rounded(c.dv, g.dv, "dv");
}

}  // namespace
}  // namespace fastattn::testing
