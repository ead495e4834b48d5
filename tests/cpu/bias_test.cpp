// The additive score bias (AttnArgs::bias) on the host: CPU forward and backward (with dbias)
// against the float64 reference over bias_cases.h, and the exact cases: a zero bias equals no bias
// bit for bit, a -inf bias equals the same pairs masked by a bitmask, a -inf row gives out 0 /
// lse -inf / zero gradients, a bias constant along a row changes nothing but lse.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bias_cases.h"
#include "cpu_check.h"
#include "fastattn/fastattn.h"

namespace fastattn::testing {
namespace {

class CpuBiasForward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBiasForward, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBiasForward, ::testing::ValuesIn(bias_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

class CpuBiasBackward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBiasBackward, MatchesReference) { check_cpu_backward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBiasBackward, ::testing::ValuesIn(bias_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

CaseSpec small_spec() {
  CaseSpec s = causal(shape(2, 37, 41, 4, 2, 32, 32, DType::F32));
  s.bias = bias(2, true);
  return s;
}

TEST(CpuBias, ZeroBiasEqualsNoBiasBitForBit) {
  Rng rng(test_seed());
  AttnCase with = make_case(small_spec(), rng);
  with.bias.storage.fill(0.0f);
  AttnCase without = with;
  without.bias = HostBias{};
  without.dbias = HostTensor{};
  run_cpu(with, with.args(Backend::CPU));
  run_cpu(without, without.args(Backend::CPU));
  expect_same_bits(with, without, "zero bias vs none");
}

TEST(CpuBias, NegInfBiasEqualsBitmask) {
  Rng rng(test_seed());
  CaseSpec s = small_spec();
  s.bias.grad = false;
  s.bits = bits(BitPattern::Random, 0.6f, 2, true);
  AttnCase masked_case = make_case(s, rng);
  // The same pairs as -inf bias entries, bits all ones.
  AttnCase biased_case = masked_case;
  const Tensor& bv = biased_case.bias.view();
  for (int64_t b = 0; b < bv.shape[0]; ++b)
    for (int64_t h = 0; h < bv.shape[1]; ++h)
      for (int64_t i = 0; i < bv.shape[2]; ++i)
        for (int64_t j = 0; j < bv.shape[3]; ++j) {
          const int64_t flat = ((b * bv.shape[1] + h) * bv.shape[2] + i) * bv.shape[3] + j;
          if (!masked_case.bits.keeps(b, h, i, j)) biased_case.bias.storage.set(flat, -INFINITY);
        }
  for (uint32_t& w : biased_case.bits.words) w = 0xffffffffu;
  run_cpu(masked_case, masked_case.args(Backend::CPU));
  run_cpu(biased_case, biased_case.args(Backend::CPU));
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  const HostTensor* xs[] = {&masked_case.out, &masked_case.lse, &masked_case.dq, &masked_case.dk, &masked_case.dv};
  const HostTensor* ys[] = {&biased_case.out, &biased_case.lse, &biased_case.dq, &biased_case.dk, &biased_case.dv};
  for (int t = 0; t < 5; ++t) {
    const std::vector<double> x = xs[t]->to_f64(), y = ys[t]->to_f64();
    for (size_t e = 0; e < x.size(); ++e) {
      if (std::isinf(x[e]) || std::isinf(y[e])) {
        ASSERT_EQ(x[e], y[e]) << names[t] << " element " << e;
      } else {
        ASSERT_NEAR(x[e], y[e], 1e-5 * (1 + std::abs(x[e]))) << names[t] << " element " << e;
      }
    }
  }
}

TEST(CpuBias, NegInfRowGivesZeroOutMinusInfLseZeroGradients) {
  Rng rng(test_seed());
  CaseSpec s = shape(1, 20, 30, 2, 1, 32, 32, DType::F32);
  s.bias = bias_holes(bias(1), 0.0f, 7);
  AttnCase c = make_case(s, rng);
  run_cpu(c, c.args(Backend::CPU));
  const std::vector<double> out = c.out.to_f64(), lse = c.lse.to_f64(), dq = c.dq.to_f64(), db = c.dbias.to_f64();
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(lse[size_t(h * 20 + 7)], -INFINITY);
    for (int x = 0; x < 32; ++x) {
      EXPECT_EQ(out[size_t((7 * 2 + h) * 32 + x)], 0.0);
      EXPECT_EQ(dq[size_t((7 * 2 + h) * 32 + x)], 0.0);
    }
  }
  for (int j = 0; j < 30; ++j) EXPECT_EQ(db[size_t(7 * 30 + j)], 0.0);
}

TEST(CpuBias, RowConstantShiftsOnlyLse) {
  Rng rng(test_seed());
  CaseSpec s = shape(1, 20, 30, 2, 2, 32, 32, DType::F32);
  s.bias = bias(2);
  AttnCase c = make_case(s, rng);
  AttnCase plain = c;
  plain.bias = HostBias{};
  plain.dbias = HostTensor{};
  for (int64_t e = 0; e < c.bias.storage.numel(); ++e) c.bias.storage.set(e, 0.5 * double((e / 30) % 20));
  run_cpu(c, c.args(Backend::CPU));
  run_cpu(plain, plain.args(Backend::CPU));
  const std::vector<double> o1 = c.out.to_f64(), o2 = plain.out.to_f64(), l1 = c.lse.to_f64(), l2 = plain.lse.to_f64();
  for (size_t e = 0; e < o1.size(); ++e) ASSERT_NEAR(o1[e], o2[e], 1e-5) << e;
  for (size_t e = 0; e < l1.size(); ++e) ASSERT_NEAR(l1[e] - l2[e], 0.5 * double(e % 20), 1e-4) << e;
  // Softmax is shift-invariant: dbias sums to zero along each row.
  const std::vector<double> db = c.dbias.to_f64();
  for (size_t r = 0; r < db.size() / 30; ++r) {
    double sum = 0;
    for (size_t j = 0; j < 30; ++j) sum += db[r * 30 + j];
    ASSERT_NEAR(sum, 0.0, 1e-5) << "row " << r;
  }
}

}  // namespace
}  // namespace fastattn::testing
