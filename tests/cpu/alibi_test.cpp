// ALiBi (AttnArgs::alibi_slopes) on the host: the CPU forward and backward against the float64 reference
// (reference/score_row.h) over odd lengths, s_q != s_k both ways, masks, softcap, GQA, varlen with empty sequences
// and seqused, splits, low-precision inputs, 2-D slopes with a padded batch stride, ALiBi beside a bias; the exact
// cases (zero slopes equal no ALiBi bit for bit; ALiBi equals the same term given as an fp32 bias bit for bit);
// and validation's refusals by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "bias_cases.h"
#include "cpu_check.h"
#include "fastattn/fastattn.h"

namespace fastattn::testing {
namespace {

CaseSpec alibi(CaseSpec s, int kind = 1, int pad = 0) {
  s.alibi = kind;
  s.alibi_pad = pad;
  return s;
}

std::vector<NamedCase> alibi_cases() {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  CaseSpec split = alibi(causal(shape(1, 70, 200, 2, 1, 32, 32, F32)), 2);
  split.num_splits = 3;
  CaseSpec steep = alibi(shape(1, 60, 300, 2, 2, 32, 32, F32));
  steep.alibi_lo = 0.5f;
  steep.alibi_hi = 2.f;  // (steeper: fp32 rounding of terms ~ -500 reaches the fp32 bound on dk; the GPU test goes to 8)
  return {
      {"heads", alibi(shape(2, 40, 50, 4, 2, 32, 32, F32))},
      {"batch_heads_padded", alibi(shape(3, 40, 50, 4, 4, 32, 32, F32), 2, 3), 1},
      {"s1", alibi(shape(2, 1, 1, 2, 2, 32, 32, F32), 2)},
      {"s17_causal", alibi(causal(shape(1, 17, 17, 2, 2, 64, 64, F32)))},
      {"sq113_sk17", alibi(shape(1, 113, 17, 2, 2, 32, 32, F32))},
      {"sq113_sk17_causal", alibi(causal(shape(1, 113, 17, 2, 2, 32, 32, F32)))},
      {"sq17_sk113_local", alibi(local(shape(1, 17, 113, 2, 2, 32, 32, F32), 20, 5), 2)},
      {"gqa8_causal", alibi(causal(shape(1, 70, 70, 8, 1, 32, 32, F32)))},
      {"softcap", alibi(ranged(softcap(shape(1, 70, 70, 2, 2, 64, 64, F32), 1.5f), 1.5f))},
      {"block_sparse", alibi(masked(shape(1, 113, 130, 2, 1, 32, 32, F32), blk(32, 64, 0.5f)))},
      {"bitmask_causal", alibi(bitmasked(causal(shape(1, 90, 90, 2, 2, 32, 32, F32)), bits(BitPattern::Random, 0.6f)))},
      {"with_bias", biased(alibi(shape(2, 40, 50, 2, 1, 32, 32, F32), 2), bias(2, true))},
      {"varlen_empty_seqs", alibi(varlen(shape(1, 0, 0, 2, 1, 64, 64, F32), {0, 17, 1, 70, 5}, {3, 17, 0, 100, 5}), 2)},
      {"varlen_causal_seqused",
       alibi(causal(used(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {20, 33, 8, 0}, {25, 40, 8, 5}), {15, 33, 0, 0},
                         {25, 17, 3, 0})))},
      // (not s_q 4097 over 40 keys without causal: row 0's terms are all ~ -4000 slope, whose fp32 rounding
      // (ulp 2^-12) moves its probabilities by ~1e-4 relative, past the fp32 bound; FlashAttention's the same)
      {"sk4097", alibi(shape(1, 40, 4097, 1, 1, 16, 16, F32))},
      {"sq4097_sk40_causal", alibi(causal(shape(1, 4097, 40, 1, 1, 16, 16, F32)))},
      {"steep", steep},
      {"splits3", split},
      {"fp16", alibi(shape(2, 70, 70, 2, 1, 64, 64, F16))},
      {"bf16_causal", alibi(causal(shape(1, 113, 113, 2, 2, 64, 64, BF16)), 2)},
  };
}

class CpuAlibiForward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuAlibiForward, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuAlibiForward, ::testing::ValuesIn(alibi_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

class CpuAlibiBackward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuAlibiBackward, MatchesReference) { check_cpu_backward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuAlibiBackward, ::testing::ValuesIn(alibi_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

CaseSpec small_spec() { return alibi(causal(shape(2, 37, 41, 4, 2, 32, 32, DType::F32)), 2); }

TEST(CpuAlibi, ZeroSlopesEqualNoAlibiBitForBit) {
  Rng rng(test_seed());
  AttnCase with = make_case(small_spec(), rng);
  with.alibi.fill(0.0f);
  AttnCase without = with;
  without.spec.alibi = 0;
  run_cpu(with, with.args(Backend::CPU));
  run_cpu(without, without.args(Backend::CPU));
  expect_same_bits(with, without, "zero slopes vs none");
}

// The same term as an fp32 bias (bias = -(slope * float(|dist|)), what the CPU backend subtracts): bit for bit.
TEST(CpuAlibi, EqualsTheTermAsAnF32Bias) {
  Rng rng(test_seed());
  CaseSpec s = local(shape(2, 45, 61, 4, 2, 32, 32, DType::F32), 30, 7);
  s.alibi = 2;
  s.bias = bias_no_grad(bias(4, true));
  AttnCase with_alibi = make_case(s, rng);
  AttnCase as_bias = with_alibi;
  as_bias.spec.alibi = 0;
  const Tensor& bv = as_bias.bias.view();
  for (int64_t b = 0; b < bv.shape[0]; ++b)
    for (int64_t h = 0; h < bv.shape[1]; ++h)
      for (int64_t i = 0; i < bv.shape[2]; ++i)
        for (int64_t j = 0; j < bv.shape[3]; ++j) {
          const float slope = static_cast<const float*>(with_alibi.alibi.view().data)[b * with_alibi.alibi.view().stride[0] + h];
          const int64_t dist = std::llabs(i + s.seqlen_k - s.seqlen_q - j);
          as_bias.bias.storage.set(((b * bv.shape[1] + h) * bv.shape[2] + i) * bv.shape[3] + j,
                                   -(slope * float(dist)));
        }
  with_alibi.bias.storage.fill(0.0f);  // the ALiBi side: the term alone (a zero bias adds exactly 0)
  run_cpu(with_alibi, with_alibi.args(Backend::CPU));
  run_cpu(as_bias, as_bias.args(Backend::CPU));
  expect_same_bits(with_alibi, as_bias, "ALiBi vs the same term as an fp32 bias");
}

TEST(CpuAlibi, RefusalsByName) {
  Rng rng(test_seed());
  AttnCase c = make_case(small_spec(), rng);
  auto refused = [&](const AttnArgs& a, const std::string& part) {
    const Status st = forward(a);
    EXPECT_EQ(st.code, Code::InvalidArgument) << part;
    EXPECT_NE(st.message.find(part), std::string::npos) << st.message;
  };
  AttnArgs a = c.args(Backend::CPU);
  a.alibi_slopes.dtype = DType::BF16;
  refused(a, "alibi_slopes: dtype bf16 but expected fp32");
  a = c.args(Backend::CPU);
  a.alibi_slopes.shape[1] = 3;
  refused(a, "alibi_slopes: shape (2, 3) but its last dim must be heads_q 4");
  a = c.args(Backend::CPU);
  a.alibi_slopes.shape[0] = 1;
  refused(a, "alibi_slopes: shape (1, 4) but its first dim must be batch 2");
  a = c.args(Backend::CPU);
  a.alibi_slopes.ndim = 3;
  a.alibi_slopes.shape[2] = 1;
  a.alibi_slopes.stride[2] = 1;
  refused(a, "alibi_slopes: expected 1 dim (heads_q) or 2 dims (batch, heads_q) but got 3");
  a = c.args(Backend::CPU);
  a.alibi_slopes.stride[1] = 2;
  refused(a, "alibi_slopes: last dim must have unit stride");
  a = c.args(Backend::CPU);
  a.alibi_slopes.device = Device::CUDA;
  const Status st = forward(a);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("alibi_slopes"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace fastattn::testing
