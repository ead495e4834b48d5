// The CUDA backward's bias rule (cuda/bias_rule.h, bias_backward_support; host code, no device): the bias kernel
// serves d 96 / 128 with d_v = d in the default mode without softcap or block mask, any bias dtype and layout;
// everything else is refused by name. CUDA builds only: cuda/bias_rule.cpp is compiled with the CUDA sources
// (a CPU-only build has no such symbol to link). Also the forward's base-pointer rule (bias_forward_support).
#include <gtest/gtest.h>

#ifdef FASTATTN_WITH_CUDA

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/bias_rule.h"

namespace fastattn {
namespace {

struct RuleCase {
  std::vector<uint16_t> q_store = std::vector<uint16_t>(8), bias_store = std::vector<uint16_t>(64);
  AttnArgs a;
  explicit RuleCase(int d, int dv, DType bias_dtype) {
    a.q = make_tensor(q_store.data(), DType::BF16, {1, 4, 2, d});
    a.k = make_tensor(q_store.data(), DType::BF16, {1, 4, 2, d});
    a.v = make_tensor(q_store.data(), DType::BF16, {1, 4, 2, dv});
    a.bias = make_tensor(bias_store.data(), bias_dtype, {1, 2, 4, 6});
  }
};

void expect_refused(const AttnArgs& a, const char* what, int major = 9) {
  const Status st = cuda_backend::bias_backward_support(a, major);
  EXPECT_EQ(st.code, Code::NotSupported) << what;
  EXPECT_NE(st.message.find(what), std::string::npos) << st.message;
  EXPECT_EQ(st.message.rfind("bias:", 0), 0u) << "named by the argument: " << st.message;
}

TEST(CudaBiasBackwardRule, RunsTheDefaultModeOfTheSmallHeadDims) {
  for (int d : {96, 128})
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      RuleCase c(d, d, dt);
      EXPECT_TRUE(cuda_backend::bias_backward_support(c.a, 9).ok()) << d;
      c.a.causal = true;
      c.a.window_left = 5;
      EXPECT_TRUE(cuda_backend::bias_backward_support(c.a, 9).ok()) << d;
    }
  RuleCase none(256, 256, DType::F32);
  none.a.bias = Tensor{};
  EXPECT_TRUE(cuda_backend::bias_backward_support(none.a, 9).ok()) << "no bias: not this rule's call";
}

TEST(CudaBiasBackwardRule, RefusesWhatTheBiasKernelLacksByName) {
  expect_refused(RuleCase(64, 64, DType::BF16).a, "head dims 96 and 128");
  expect_refused(RuleCase(256, 256, DType::F32).a, "head dims 96 and 128");
  expect_refused(RuleCase(192, 128, DType::F32).a, "head dims 96 and 128");
  RuleCase det(128, 128, DType::BF16);
  det.a.deterministic = true;
  expect_refused(det.a, "no deterministic mode");
  RuleCase cap(128, 128, DType::BF16);
  cap.a.softcap = 30.f;
  expect_refused(cap.a, "no softcap");
  for (MaskKind kind : {MaskKind::BlockSparse, MaskKind::DenseBitmask}) {
    RuleCase m(96, 96, DType::F32);
    m.a.mask.kind = kind;
    expect_refused(m.a, "block-sparse or bitmask");
  }
}

// Odd strides and a base off 4 bytes: the 16-bit entries are read one by one (BwdBias::pairs off), not refused;
// an F32 bias off 4 bytes is (its loads are 4-byte).
TEST(CudaBiasBackwardRule, AnyStridesOfEveryDtype) {
  RuleCase f32_shifted(128, 128, DType::F32);
  f32_shifted.a.bias.data = f32_shifted.bias_store.data() + 1;
  expect_refused(f32_shifted.a, "aligned to the bias's element size");
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    RuleCase odd_rows(128, 128, dt);
    odd_rows.a.bias.stride[2] = 7;  // rows padded to an odd stride
    odd_rows.a.bias.stride[1] = 28;
    odd_rows.a.bias.stride[0] = 56;
    EXPECT_TRUE(cuda_backend::bias_backward_support(odd_rows.a, 9).ok());
    if (dt == DType::F32) continue;
    RuleCase shifted(96, 96, dt);
    shifted.a.bias.data = shifted.bias_store.data() + 1;
    EXPECT_TRUE(cuda_backend::bias_backward_support(shifted.a, 9).ok());
  }
}

// Review s39: the sm80 backward has no bias path; before the rule took the device's major, an A100 call with a bias
// at d 128 passed check_backward and ran the sm80 kernels, which read no bias (unbiased gradients, dbias 0).
TEST(CudaBiasBackwardRule, RefusedOffSm90ByName) {
  for (int major : {8, 10}) expect_refused(RuleCase(128, 128, DType::BF16).a, "runs on sm90 (Hopper) only", major);
  RuleCase none(128, 128, DType::BF16);
  none.a.bias = Tensor{};
  EXPECT_TRUE(cuda_backend::bias_backward_support(none.a, 8).ok()) << "no bias: the sm80 backward's own call";
}

// Review s39: dbias is added into by fp32 atomics; a C caller's dbias off 4 bytes is refused by name (was a
// misaligned-address fault in the kernel).
TEST(CudaBiasBackwardRule, DbiasBaseAlignedToFourBytes) {
  RuleCase c(128, 128, DType::BF16);
  std::vector<float> dbias_store(64);
  c.a.dbias = make_tensor(dbias_store.data(), DType::F32, {1, 2, 4, 6});
  EXPECT_TRUE(cuda_backend::bias_backward_support(c.a, 9).ok());
  c.a.dbias.data = reinterpret_cast<char*>(dbias_store.data()) + 2;
  const Status st = cuda_backend::bias_backward_support(c.a, 9);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_EQ(st.message.rfind("dbias:", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("4-byte aligned"), std::string::npos) << st.message;
}

// Review s40: the forward's bias rule took any base pointer, but the kernel reads 16-bit entries (two at once
// where 4-byte aligned): a C caller's bf16 bias at an odd address reached `ld.global.u16` (a misaligned-address
// fault, which poisons the CUDA context) instead of a refusal by name. Aligned to 2 bytes (not 4) still runs.
TEST(CudaBiasForwardRule, BaseAlignedToTheElementSize) {
  RuleCase c(128, 128, DType::BF16);
  EXPECT_TRUE(cuda_backend::bias_forward_support(c.a, 9).ok());
  c.a.bias.data = c.bias_store.data() + 1;  // 2-byte aligned: the 16-bit path
  EXPECT_TRUE(cuda_backend::bias_forward_support(c.a, 9).ok());
  c.a.bias.data = reinterpret_cast<char*>(c.bias_store.data()) + 1;
  const Status st = cuda_backend::bias_forward_support(c.a, 9);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_EQ(st.message.rfind("bias:", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("aligned to the bias's element size"), std::string::npos) << st.message;
}

// ALiBi takes the bias kernels (cuda/bias_rule.cpp, alibi_rules): their limits, named as ALiBi's, and never with a
// stored bias; sm80 refuses it in both passes (its kernels would run without the term).
TEST(CudaAlibiRule, RunsTheBiasKernelsLimitsNamedAsAlibi) {
  RuleCase c(128, 128, DType::BF16);
  std::vector<float> slopes(2);
  c.a.alibi_slopes = make_tensor(slopes.data(), DType::F32, {2});
  auto refused = [](const Status& st, const char* what) {
    EXPECT_EQ(st.code, Code::NotSupported) << what;
    EXPECT_EQ(st.message.rfind("alibi_slopes:", 0), 0u) << st.message;
    EXPECT_NE(st.message.find(what), std::string::npos) << st.message;
  };
  refused(cuda_backend::bias_forward_support(c.a, 9), "ALiBi or a bias, not both");
  refused(cuda_backend::bias_backward_support(c.a, 9), "ALiBi or a bias, not both");
  c.a.bias = Tensor{};
  EXPECT_TRUE(cuda_backend::bias_forward_support(c.a, 9).ok());
  EXPECT_TRUE(cuda_backend::bias_backward_support(c.a, 9).ok());
  refused(cuda_backend::bias_forward_support(c.a, 8), "runs on sm90 (Hopper) only");
  refused(cuda_backend::bias_backward_support(c.a, 8), "runs on sm90 (Hopper) only");
  c.a.num_splits = 2;
  const Status split = cuda_backend::bias_forward_support(c.a, 9);
  EXPECT_EQ(split.code, Code::NotSupported);
  EXPECT_NE(split.message.find("with ALiBi has no split-KV"), std::string::npos) << split.message;
  RuleCase d64(64, 64, DType::BF16);
  d64.a.bias = Tensor{};
  d64.a.alibi_slopes = c.a.alibi_slopes;
  EXPECT_TRUE(cuda_backend::bias_forward_support(d64.a, 9).ok());
  refused(cuda_backend::bias_backward_support(d64.a, 9), "runs head dims 96 and 128");
  RuleCase d256(256, 256, DType::BF16);
  d256.a.bias = Tensor{};
  d256.a.alibi_slopes = c.a.alibi_slopes;
  refused(cuda_backend::bias_forward_support(d256.a, 9), "takes head dims up to 128");
}

}  // namespace
}  // namespace fastattn
#endif  // FASTATTN_WITH_CUDA
