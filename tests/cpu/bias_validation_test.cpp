// Every bias / dbias validation rule (AttnArgs::bias, AttnArgs::dbias): the call fails with the
// right code, the message names the argument and the rule, no output is touched; and the layouts
// the host backends take (broadcast strides, extra rows / cols, bf16 / fp16) pass.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "fastattn/fastattn.h"
#include "cpu_cases.h"

namespace fastattn::testing {
namespace {

// b 2, s_q 8, s_k 10, h_q 4, h_kv 2, fp16, a (2, 2, 8, 10) fp32 bias with its dbias.
CaseSpec bias_spec(bool varlen) {
  CaseSpec s = shape(2, 8, 10, 4, 2, 16, 16, DType::F16);
  if (varlen) {
    s.lens_q = {3, 0, 5};
    s.lens_k = {4, 2, 4};
  }
  s.bias.on = true;
  s.bias.per_batch = true;
  s.bias.heads = 2;
  s.bias.grad = true;
  return s;
}

struct BiasRule {
  const char* name;
  bool varlen;
  bool backward;  // checked through validate_backward / backward (dbias rules)
  std::function<void(AttnArgs&)> mutate;
  Code code;
  std::vector<const char*> message;
};

std::vector<BiasRule> bias_rules() {
  using A = AttnArgs;
  const Code bad = Code::InvalidArgument, unsup = Code::NotSupported;
  return {
      {"rank", false, false, [](A& a) { a.bias.ndim = 3; }, bad,
       {"bias: expected 4 dims (bias_batch, bias_heads, rows, cols) but got 3"}},
      {"dtype_code", false, false, [](A& a) { a.bias.dtype = DType(9); }, bad, {"bias: unknown dtype code 9"}},
      {"last_stride", false, false, [](A& a) { a.bias.stride[3] = 2; }, bad,
       {"bias: last dim must have unit stride but has stride 2"}},
      {"dim_zero", false, false, [](A& a) { a.bias.shape[1] = 0; }, bad, {"bias: dim 1 has size 0"}},
      {"batch", false, false, [](A& a) { a.bias.shape[0] = 3; }, bad,
       {"bias: dim 0 (bias_batch) is 3 but must be 1 (shared) or batch 2"}},
      {"heads", false, false, [](A& a) { a.bias.shape[1] = 3; }, bad,
       {"bias: dim 1 (bias_heads) is 3 but must divide heads_q 4"}},
      {"rows", false, false, [](A& a) { a.bias.shape[2] = 7; }, bad,
       {"bias: dim 2 (rows) is 7 but must be >= seqlen_q 8"}},
      {"cols", false, false, [](A& a) { a.bias.shape[3] = 9; }, bad,
       {"bias: dim 3 (cols) is 9 but must be >= seqlen_k 10"}},
      {"varlen_batch", true, false, [](A& a) { a.bias.shape[0] = 2; }, bad,
       {"bias: dim 0 (bias_batch) is 2 but must be 1 (shared) or batch 3"}},
      {"varlen_rows", true, false, [](A& a) { a.bias.shape[2] = 4; }, bad,
       {"bias: dim 2 (rows) is 4 but must be >= max_seqlen_q 5"}},
      {"varlen_cols_derived", true, false, [](A& a) { a.bias.shape[3] = 3; a.max_seqlen_k = 0; }, bad,
       {"bias: dim 3 (cols) is 3 but must be >= max_seqlen_k 4"}},
      {"device", false, false, [](A& a) { a.bias.device = Device::CUDA; }, bad, {"bias: on cuda:0 but q is on cpu"}},
      {"dbias_without_bias", false, false, [](A& a) { a.bias = Tensor{}; }, bad, {"dbias: given without bias"}},
      {"dbias_dtype", false, true, [](A& a) { a.dbias.dtype = DType::BF16; }, unsup,
       {"dbias: dtype bf16 is not supported", "fp32"}},
      {"dbias_shape", false, true, [](A& a) { a.dbias.shape[2] = 9; a.dbias.stride[1] = 90; a.dbias.stride[0] = 180; },
       bad, {"dbias: shape (2, 2, 9, 10) must equal bias's shape (2, 2, 8, 10)"}},
      {"dbias_rank", false, true, [](A& a) { a.dbias.ndim = 2; }, bad, {"dbias: expected 4 dims"}},
      {"dbias_stride", false, true, [](A& a) { a.dbias.stride[3] = 0; }, bad, {"dbias: last dim must have unit stride"}},
      {"dbias_broadcast", false, true, [](A& a) { a.dbias.stride[1] = 0; }, bad, {"dbias: dim 1 has stride 0"}},
      // Review s39: entries sharing an address without a stride 0 (rows 5 floats apart, 10 wide; heads 40 apart
      // over 8 rows of 10): the backward's adds and stores of two entries mixed, unrefused.
      {"dbias_rows_overlap", false, true, [](A& a) { a.dbias.stride[2] = 5; }, bad,
       {"dbias: dim 2 has stride 5", "two entries at one address"}},
      {"dbias_heads_overlap", false, true, [](A& a) { a.dbias.stride[1] = 40; }, bad,
       {"dbias: dim 1 has stride 40", "two entries at one address"}},
      {"dbias_device", false, true, [](A& a) { a.dbias.device = Device::CUDA; }, bad, {"dbias: on cuda:0 but q is on cpu"}},
      {"mask_kind_bias", false, false, [](A& a) { a.mask.kind = MaskKind::Bias; }, unsup,
       {"mask: kind 3 is not supported", "AttnArgs::bias"}},
  };
}

void expect_status(const Status& st, Code code, const std::vector<const char*>& parts, const char* rule) {
  EXPECT_EQ(int(st.code), int(code)) << rule << ": " << st.message;
  for (const char* part : parts) {
    EXPECT_NE(st.message.find(part), std::string::npos) << rule << ": message \"" << st.message << "\" lacks \"" << part
                                                        << "\"";
  }
}

class BiasValidation : public ::testing::TestWithParam<BiasRule> {};

TEST_P(BiasValidation, RejectsWithoutWriting) {
  const BiasRule& rule = GetParam();
  Rng rng(test_seed());
  AttnCase c = make_case(bias_spec(rule.varlen), rng);
  AttnArgs a = c.args(Backend::CPU);
  const Tensor dout = c.dout.view(), dq = c.dq.view(), dk = c.dk.view(), dv = c.dv.view();
  ASSERT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
  ASSERT_TRUE(validate_backward(a, dout, dq, dk, dv).ok()) << validate_backward(a, dout, dq, dk, dv).message;
  rule.mutate(a);
  if (rule.backward) {
    expect_status(validate_backward(a, dout, dq, dk, dv), rule.code, rule.message, rule.name);
    expect_status(backward(a, dout, dq, dk, dv), rule.code, rule.message, rule.name);
  } else {
    expect_status(validate_forward(a), rule.code, rule.message, rule.name);
    expect_status(forward(a), rule.code, rule.message, rule.name);
    expect_status(validate_backward(a, dout, dq, dk, dv), rule.code, rule.message, rule.name);
  }
  for (const HostTensor* t : {&c.out, &c.lse, &c.dq, &c.dk, &c.dv, &c.dbias})
    EXPECT_EQ(t->count_nan(), t->numel()) << rule.name << ": an output was written";
}

INSTANTIATE_TEST_SUITE_P(Rules, BiasValidation, ::testing::ValuesIn(bias_rules()),
                         [](const ::testing::TestParamInfo<BiasRule>& p) { return std::string(p.param.name); });

TEST(BiasValidation, LayoutsAccepted) {
  Rng rng(test_seed());
  for (int layout : {0, 1, 2}) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      CaseSpec s = bias_spec(false);
      s.bias.layout = layout;
      s.bias.dtype = dt;
      s.bias.extra_rows = 3;
      s.bias.extra_cols = 5;
      AttnCase c = make_case(s, rng);
      const AttnArgs a = c.args(Backend::CPU);
      EXPECT_TRUE(validate_forward(a).ok()) << validate_forward(a).message << " layout " << layout;
      EXPECT_TRUE(validate_backward(a, c.dout.view(), c.dq.view(), c.dk.view(), c.dv.view()).ok()) << layout;
    }
  }
  // Dims 0 and 1 broadcast by stride 0 (a (b, h) expand of one (rows, cols) matrix).
  CaseSpec s = bias_spec(false);
  s.bias.per_batch = false;
  s.bias.heads = 1;
  s.bias.grad = false;
  AttnCase c = make_case(s, rng);
  AttnArgs a = c.args(Backend::CPU);
  a.bias.shape[0] = 2;
  a.bias.stride[0] = 0;
  a.bias.shape[1] = 4;
  a.bias.stride[1] = 0;
  EXPECT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
}

// dbias layouts whose entries each have their own address pass (review s39's overlap rule refuses no such
// layout): dense, rows padded, batch and heads swapped in memory, rows reversed (negative stride).
TEST(BiasValidation, DbiasLayoutsWithDistinctEntriesAccepted) {
  Rng rng(test_seed());
  AttnCase c = make_case(bias_spec(false), rng);  // dbias (2, 2, 8, 10)
  std::vector<float> store(2 * 2 * 8 * 16);
  const Tensor dout = c.dout.view(), dq = c.dq.view(), dk = c.dk.view(), dv = c.dv.view();
  struct Layout {
    const char* name;
    int64_t offset, stride[3];
  };
  const Layout layouts[] = {{"dense", 0, {160, 80, 10}},
                            {"padded_rows", 0, {256, 128, 16}},
                            {"heads_outer", 0, {80, 160, 10}},
                            {"rows_reversed", 70, {160, 80, -10}}};
  for (const Layout& l : layouts) {
    AttnArgs a = c.args(Backend::CPU);
    a.dbias = make_tensor(store.data() + l.offset, DType::F32, {2, 2, 8, 10});
    for (int i = 0; i < 3; ++i) a.dbias.stride[i] = l.stride[i];
    EXPECT_TRUE(validate_backward(a, dout, dq, dk, dv).ok()) << l.name << ": " << validate_backward(a, dout, dq, dk, dv).message;
  }
}

#ifndef FASTATTN_WITH_CUDA
TEST(BiasValidation, CudaBackendRefusedWithoutCuda) {
  Rng rng(test_seed());
  AttnCase c = make_case(bias_spec(false), rng);
  AttnArgs a = c.args(Backend::CUDA);
  EXPECT_FALSE(validate_forward(a).ok());
}
#endif

}  // namespace
}  // namespace fastattn::testing
