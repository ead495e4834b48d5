// The float64 reference backward against central finite differences of
// L(q, k, v) = sum(dout * out), on small problems covering each feature.
#include <gtest/gtest.h>

#include <cmath>

#include "bias_cases.h"
#include "cpu_cases.h"
#include "reference/reference.h"

namespace fastattn::testing {
namespace {

double loss(const AttnCase& c) {
  reference::ForwardF64 r;
  EXPECT_TRUE(reference::forward_f64(c.args(Backend::Reference), &r).ok());
  const std::vector<double> dout = c.dout.to_f64();
  double l = 0;
  for (size_t i = 0; i < dout.size(); ++i) l += dout[i] * r.out[i];
  return l;
}

// d loss / d t[i] for every element of `t` (a member of c), by central differences on the
// fp32-stored value: the step actually taken (after rounding) is the denominator.
void expect_gradient(AttnCase& c, HostTensor& t, const std::vector<double>& grad, const char* name,
                     const std::string& ctx) {
  ASSERT_EQ(size_t(t.numel()), grad.size());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.get(i);
    t.set(i, x + 1e-3);
    const double xp = t.get(i), lp = loss(c);
    t.set(i, x - 1e-3);
    const double xm = t.get(i), lm = loss(c);
    t.set(i, x);
    const double fd = (lp - lm) / (xp - xm);
    EXPECT_NEAR(grad[size_t(i)], fd, 2e-6 + 1e-5 * std::abs(fd)) << name << '[' << i << "]; " << ctx;
  }
}

class ReferenceGradient : public ::testing::TestWithParam<NamedCase> {};

TEST_P(ReferenceGradient, MatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  AttnCase c = make_case(GetParam().spec, rng);
  const std::string ctx = GetParam().spec.describe() + ", " + seed_note(seed);
  reference::BackwardF64 g;
  ASSERT_TRUE(reference::backward_f64(c.args(Backend::Reference), c.dout.view(), &g).ok());
  expect_gradient(c, c.q, g.dq, "dq", ctx);
  expect_gradient(c, c.k, g.dk, "dk", ctx);
  expect_gradient(c, c.v, g.dv, "dv", ctx);
  if (c.spec.bias.grad) expect_gradient(c, c.bias.storage, g.dbias, "dbias", ctx);  // row-major layouts only
}

std::vector<NamedCase> gradient_cases() {
  constexpr DType F32 = DType::F32;
  return {
      {"plain", shape(1, 5, 7, 2, 2, 4, 3, F32)},
      {"gqa_causal", causal(shape(1, 6, 6, 4, 2, 3, 2, F32))},
      {"causal_sq_gt_sk", causal(shape(1, 7, 4, 2, 1, 3, 3, F32))},
      {"local", local(shape(2, 6, 8, 1, 1, 4, 2, F32), 2, 1)},
      {"softcap", ranged(softcap(shape(1, 5, 6, 2, 1, 4, 3, F32), 0.8f), 2.0f)},
      {"varlen_seqused", used(varlen(shape(1, 0, 0, 2, 1, 3, 2, F32), {3, 0, 5}, {4, 2, 6}), {2, 0, 5}, {4, 1, 3})},
      // dbias: per entry, summed over shared batch entries / heads, zero outside the sequences.
      {"bias_per_batch_heads", biased(shape(2, 5, 7, 4, 2, 4, 3, F32), bias(4, true))},
      {"bias_shared_gqa_causal", biased(causal(shape(2, 6, 6, 4, 2, 3, 2, F32)), bias(1))},
      {"bias_softcap", biased(ranged(softcap(shape(1, 5, 6, 2, 1, 4, 3, F32), 0.8f), 2.0f), bias(2))},
      {"bias_varlen_extra", biased(used(varlen(shape(1, 0, 0, 2, 1, 3, 2, F32), {3, 0, 5}, {4, 2, 6}), {2, 0, 5},
                                        {4, 1, 3}),
                                   bias_extra(bias(1, true), 2, 3))},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceGradient, ::testing::ValuesIn(gradient_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

}  // namespace
}  // namespace fastattn::testing
