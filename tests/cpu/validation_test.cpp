// Every validation rule: the call fails with the right code, the message names the argument
// and the rule, and no output is touched (they stay poisoned).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>

#include "fastattn/fastattn.h"
#include "support/attn_case.h"

namespace fastattn::testing {
namespace {

struct Rule {
  const char* name;
  bool varlen;
  std::function<void(AttnArgs&, AttnCase&)> mutate;
  Code code;
  std::vector<const char*> message;  // substrings the message must contain
};

CaseSpec fixed_spec() {
  CaseSpec s;
  s.batch = 2;
  s.seqlen_q = 8;
  s.seqlen_k = 10;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 16;
  s.head_dim_v = 16;
  s.dtype = DType::F16;
  return s;
}

CaseSpec varlen_spec() {
  CaseSpec s = fixed_spec();
  s.lens_q = {3, 0, 5};
  s.lens_k = {4, 2, 4};
  return s;
}

// A valid-looking block mask of `shape` over `bytes` (all kept, row-major) on a's args.
void set_blocks(AttnArgs& a, std::vector<uint8_t>& bytes, std::array<int64_t, 4> shape, int32_t bq, int32_t bk) {
  bytes.assign(size_t(shape[0] * shape[1] * shape[2] * shape[3]), 1);
  a.mask.kind = MaskKind::BlockSparse;
  BlockMask& m = a.mask.blocks;
  m.data = bytes.data();
  for (int i = 0; i < 4; ++i) m.shape[i] = shape[size_t(i)];
  m.stride[3] = 1;
  for (int i = 2; i >= 0; --i) m.stride[i] = m.stride[i + 1] * shape[size_t(i + 1)];
  m.block_q = bq;
  m.block_k = bk;
}

// A valid-looking element bitmask of `shape` (rows, words) over `words` (all set, row-major) on a's args.
void set_bits(AttnArgs& a, std::vector<uint32_t>& words, std::array<int64_t, 4> shape) {
  words.assign(size_t(shape[0] * shape[1] * shape[2] * shape[3]), 0xffffffffu);
  a.mask.kind = MaskKind::DenseBitmask;
  BitMask& m = a.mask.bits;
  m.data = words.data();
  for (int i = 0; i < 4; ++i) m.shape[i] = shape[size_t(i)];
  m.stride[2] = shape[3];
  m.stride[1] = shape[2] * shape[3];
  m.stride[0] = shape[1] * shape[2] * shape[3];
}

void expect_untouched(const AttnCase& c, const char* rule) {
  for (const HostTensor* t : {&c.out, &c.lse, &c.dq, &c.dk, &c.dv}) {
    EXPECT_EQ(t->count_nan(), t->numel()) << rule << ": an output was written";
  }
}

void expect_status(const Status& st, Code code, const std::vector<const char*>& parts, const char* rule) {
  EXPECT_EQ(int(st.code), int(code)) << rule << ": " << st.message;
  for (const char* part : parts) {
    EXPECT_NE(st.message.find(part), std::string::npos) << rule << ": message \"" << st.message
                                                        << "\" lacks \"" << part << "\"";
  }
}

std::vector<Rule> forward_rules() {
  using A = AttnArgs;
  using C = AttnCase;
  const Code bad = Code::InvalidArgument, unsup = Code::NotSupported;
  return {
      {"q_null", false, [](A& a, C&) { a.q.data = nullptr; }, bad, {"q: data pointer is null"}},
      {"out_null", false, [](A& a, C&) { a.out.data = nullptr; }, bad, {"out: data pointer is null"}},
      {"q_rank", false, [](A& a, C&) { a.q.ndim = 3; }, bad,
       {"q: expected 4 dims (batch, seqlen, heads, head_dim) but got 3"}},
      {"varlen_rank", true, [](A& a, C&) { a.k.ndim = 4; }, bad, {"k: expected 3 dims (total_k, heads, head_dim) but got 4"}},
      {"negative_size", false, [](A& a, C&) { a.v.shape[1] = -1; }, bad, {"v: dim 1 has negative size -1"}},
      {"dtype_code", false, [](A& a, C&) { a.q.dtype = DType(7); }, bad, {"q: unknown dtype code 7"}},
      {"k_dtype", false, [](A& a, C&) { a.k.dtype = DType::BF16; }, bad,
       {"k: dtype bf16 but expected fp16", "q, k, v must share a dtype"}},
      {"v_dtype", false, [](A& a, C&) { a.v.dtype = DType::F32; }, bad, {"v: dtype fp32 but expected fp16"}},
      {"out_dtype", false, [](A& a, C&) { a.out.dtype = DType::BF16; }, bad, {"out: dtype bf16", "out has q's dtype"}},
      {"lse_dtype", false, [](A& a, C&) { a.lse.dtype = DType::F16; }, bad, {"lse: dtype fp16 but expected fp32"}},
      {"lse_shape", false, [](A& a, C&) { a.lse.shape[2] = 7; }, bad,
       {"lse: expected shape (batch, heads_q, seqlen_q) = (2, 4, 8) but got (2, 4, 7)"}},
      {"k_head_dim", false, [](A& a, C&) { a.k.shape[3] = 8; }, bad, {"k: expected shape", "head_dim of q", "(2, 10, 2, 8)"}},
      {"v_seqlen", false, [](A& a, C&) { a.v.shape[1] = 9; }, bad, {"v: expected shape", "seqlen_k"}},
      {"k_batch", false, [](A& a, C&) { a.k.shape[0] = 1; }, bad, {"k: expected shape (batch of q"}},
      {"out_shape", false, [](A& a, C&) { a.out.shape[3] = 15; }, bad, {"out: expected shape (batch, seqlen_q, heads_q, head_dim_v)"}},
      {"last_stride", false, [](A& a, C&) { a.q.stride[3] = 2; }, bad, {"q: last dim must have unit stride but has stride 2"}},
      {"lse_stride", false, [](A& a, C&) { a.lse.stride[2] = 3; }, bad, {"lse: last dim must have unit stride"}},
      {"gqa_ratio", false, [](A& a, C&) { a.k.shape[2] = 3; a.v.shape[2] = 3; }, bad,
       {"q: heads 4 is not a multiple of k's heads 3"}},
      {"head_dim_too_big", false,
       [](A& a, C&) { a.q.shape[3] = 2000; a.k.shape[3] = 2000; }, unsup,
       {"q: head_dim 2000 not supported by backend cpu (supported: 1..1024)"}},
      {"head_dim_v_zero", false, [](A& a, C&) { a.v.shape[3] = 0; a.out.shape[3] = 0; }, unsup,
       {"v: head_dim_v 0 not supported"}},
      {"reference_head_dim", false,
       [](A& a, C&) { a.q.shape[3] = 1025; a.k.shape[3] = 1025; a.backend = Backend::Reference; }, unsup,
       {"not supported by backend reference"}},
      {"cu_start", true, [](A&, C& c) { c.cu_q[0] = 1; }, bad, {"cu_seqlens_q: must start at 0 but starts at 1"}},
      {"cu_decreasing", true, [](A&, C& c) { c.cu_k[1] = 7; }, bad,
       {"cu_seqlens_k: must be non-decreasing but entry 2 (6) < entry 1 (7)"}},
      {"cu_total", true, [](A&, C& c) { c.cu_q[3] = 7; }, bad, {"cu_seqlens_q: last entry 7 must equal total_q"}},
      {"cu_size", true, [](A& a, C&) { a.cu_seqlens_k.size = 3; }, bad,
       {"cu_seqlens_k: has 3 entries but cu_seqlens_q has 4"}},
      {"cu_only_q", true, [](A& a, C&) { a.cu_seqlens_k = {}; }, bad, {"cu_seqlens_k: missing"}},
      {"cu_only_k", false,
       [](A& a, C& c) { c.cu_k = {0, 10, 20}; a.cu_seqlens_k = {c.cu_k.data(), 3}; }, bad, {"cu_seqlens_q: missing"}},
      {"max_seqlen", true, [](A& a, C&) { a.max_seqlen_q = 4; }, bad, {"max_seqlen_q: 4 is less than the length 5 of sequence 2"}},
      {"max_seqlen_negative", true, [](A& a, C&) { a.max_seqlen_k = -1; }, bad, {"max_seqlen_k: must be >= 0"}},
      {"seqused_range", true,
       [](A& a, C& c) { c.used_k = {1, 3, 0}; a.seqused_k = {c.used_k.data(), 3}; }, bad,
       {"seqused_k: entry 1 is 3 but must be in [0, 2]"}},
      {"seqused_negative", false,
       [](A& a, C& c) { c.used_q = {-1, 2}; a.seqused_q = {c.used_q.data(), 2}; }, bad,
       {"seqused_q: entry 0 is -1 but must be in [0, 8]"}},
      {"seqused_size", false,
       [](A& a, C& c) { c.used_q = {1}; a.seqused_q = {c.used_q.data(), 1}; }, bad,
       {"seqused_q: has 1 entries but batch is 2"}},
      {"window_left", false, [](A& a, C&) { a.window_left = -2; }, bad, {"window_left: must be >= -1 (-1 = unbounded) but got -2"}},
      {"window_right", false, [](A& a, C&) { a.window_right = -5; }, bad, {"window_right: must be >= -1", "-5"}},
      {"scale_negative", false, [](A& a, C&) { a.softmax_scale = -0.5f; }, bad,
       {"softmax_scale: must be finite and >= 0", "-0.5"}},
      {"scale_inf", false, [](A& a, C&) { a.softmax_scale = INFINITY; }, bad, {"softmax_scale: must be finite"}},
      {"softcap_negative", false, [](A& a, C&) { a.softcap = -1.0f; }, bad, {"softcap: must be finite and >= 0"}},
      {"softcap_nan", false, [](A& a, C&) { a.softcap = NAN; }, bad, {"softcap: must be finite"}},
      {"device_mismatch", false, [](A& a, C&) { a.k.device = Device::CUDA; }, bad,
       {"k: on cuda:0 but q is on cpu", "one device"}},
      {"device_index", false,
       [](A& a, C&) {
         for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = Device::CUDA;
         a.v.device_index = 1;
       },
       bad, {"v: on cuda:1 but q is on cuda:0"}},
      {"cuda_tensors_cpu_backend", false,
       [](A& a, C&) {
         for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = Device::CUDA;
         a.backend = Backend::CPU;
       },
       bad, {"q: on cuda:0 but backend cpu needs host tensors"}},
#ifdef FASTATTN_WITH_CUDA
      {"cuda_backend_host_tensors", false, [](A& a, C&) { a.backend = Backend::CUDA; }, bad,
       {"backend cuda needs CUDA device tensors"}},
#else
      {"cuda_backend_without_cuda", false, [](A& a, C&) { a.backend = Backend::CUDA; }, unsup,
       {"built without CUDA"}},
      {"auto_cuda_tensors_without_cuda", false,
       [](A& a, C&) { for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = Device::CUDA; }, unsup,
       {"built without CUDA"}},
#endif
      {"backend_code", false, [](A& a, C&) { a.backend = Backend(9); }, bad, {"backend: unknown code 9"}},
      {"num_threads", false, [](A& a, C&) { a.num_threads = -1; }, bad, {"num_threads: must be >= 0"}},
      {"mask_kind", false, [](A& a, C&) { a.mask.kind = MaskKind(7); }, unsup,
       {"mask: kind 7 is not supported", "AttnArgs::bias"}},
      // Element bitmasks (fixed spec: batch 2, s_q 8, s_k 10, heads 4 / 2; varlen: batch 3, longest 5 / 4).
      {"bits_null", false, [](A& a, C&) { a.mask.kind = MaskKind::DenseBitmask; }, bad,
       {"mask.bits: data is null", "(mask_batch, mask_heads, rows, words)"}},
      {"bits_without_kind", false,
       [](A& a, C& c) { set_bits(a, c.bits.words, {1, 1, 8, 1}); a.mask.kind = MaskKind::None; }, bad,
       {"mask.bits: given but mask.kind is 0"}},
      {"bits_device", false,
       [](A& a, C& c) { set_bits(a, c.bits.words, {1, 1, 8, 1}); a.mask.bits.device = Device::CUDA; }, bad,
       {"mask.bits: on cuda:0 but q is on cpu"}},
      {"bits_dim_zero", false, [](A& a, C& c) { set_bits(a, c.bits.words, {1, 1, 8, 1}); a.mask.bits.shape[3] = 0; },
       bad, {"mask.bits: dim 3 has size 0"}},
      {"bits_batch", false, [](A& a, C& c) { set_bits(a, c.bits.words, {3, 1, 8, 1}); }, bad,
       {"mask.bits: dim 0 (mask_batch) is 3 but must be 1 (shared) or batch 2"}},
      {"bits_heads", false, [](A& a, C& c) { set_bits(a, c.bits.words, {1, 3, 8, 1}); }, bad,
       {"mask.bits: dim 1 (mask_heads) is 3 but must divide heads_q 4"}},
      {"bits_rows", false, [](A& a, C& c) { set_bits(a, c.bits.words, {2, 2, 7, 1}); }, bad,
       {"mask.bits: dim 2 (rows) is 7 but must be >= seqlen_q 8"}},
      {"bits_varlen_rows", true, [](A& a, C& c) { set_bits(a, c.bits.words, {3, 1, 4, 1}); }, bad,
       {"mask.bits: dim 2 (rows) is 4 but must be >= max_seqlen_q 5"}},
      {"bits_with_blocks_kind", false,
       [](A& a, C& c) { set_bits(a, c.bits.words, {1, 1, 8, 1}); set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); },
       bad, {"mask.bits: given together with a block-sparse mask"}},
      {"mask_bias", false, [](A& a, C&) { a.mask.kind = MaskKind::Bias; }, unsup, {"mask: kind 3 is not supported"}},
      // Block-sparse masks (fixed spec: batch 2, s_q 8, s_k 10, heads 4 / 2; varlen: batch 3,
      // longest 5 / 4).
      {"blocks_null", false, [](A& a, C&) { a.mask.kind = MaskKind::BlockSparse; }, bad,
       {"mask.blocks: data is null", "(mask_batch, mask_heads, q_blocks, k_blocks)"}},
      {"blocks_without_kind", false,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); a.mask.kind = MaskKind::None; }, bad,
       {"mask.blocks: given but mask.kind is 0"}},
      {"blocks_device", false,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); a.mask.blocks.device = Device::CUDA; },
       bad, {"mask.blocks: on cuda:0 but q is on cpu"}},
      {"blocks_device_code", false,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); a.mask.blocks.device = Device(5); },
       bad, {"mask.blocks: unknown device code 5"}},
      {"blocks_dim_zero", false,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); a.mask.blocks.shape[2] = 0; }, bad,
       {"mask.blocks: dim 2 has size 0"}},
      {"blocks_dim_huge", false,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, 10); a.mask.blocks.shape[3] = 1ll << 32; }, bad,
       {"mask.blocks: dim 3 has size 4294967296"}},
      {"blocks_block_q", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 0, 10); }, bad,
       {"mask.blocks: block_q must be >= 1 but got 0"}},
      {"blocks_block_k", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 1}, 8, -3); }, bad,
       {"mask.blocks: block_k must be >= 1 but got -3"}},
      {"blocks_batch", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {3, 1, 1, 1}, 8, 10); }, bad,
       {"mask.blocks: dim 0 (mask_batch) is 3 but must be 1 (shared) or batch 2"}},
      {"blocks_heads", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 3, 1, 1}, 8, 10); }, bad,
       {"mask.blocks: dim 1 (mask_heads) is 3 but must divide heads_q 4"}},
      {"blocks_q_cover", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {2, 4, 1, 3}, 4, 4); }, bad,
       {"mask.blocks: dim 2 is 1 but must be >= ceil(seqlen_q 8 / block_q 4) = 2"}},
      {"blocks_k_cover", false, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {2, 2, 2, 2}, 4, 4); }, bad,
       {"mask.blocks: dim 3 is 2 but must be >= ceil(seqlen_k 10 / block_k 4) = 3"}},
      {"blocks_varlen_batch", true, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {2, 1, 1, 1}, 8, 8); }, bad,
       {"mask.blocks: dim 0 (mask_batch) is 2 but must be 1 (shared) or batch 3"}},
      {"blocks_varlen_cover", true, [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {3, 1, 2, 1}, 2, 4); }, bad,
       {"mask.blocks: dim 2 is 2 but must be >= ceil(max_seqlen_q 5 / block_q 2) = 3"}},
      {"blocks_varlen_derived", true,
       [](A& a, C& c) { set_blocks(a, c.blocks.bytes, {1, 1, 1, 3}, 8, 1); a.max_seqlen_k = 0; }, bad,
       {"mask.blocks: dim 3 is 3 but must be >= ceil(max_seqlen_k 4 / block_k 1) = 4"}},
  };
}

class ForwardValidation : public ::testing::TestWithParam<Rule> {};

TEST_P(ForwardValidation, RejectsWithoutWriting) {
  const Rule& rule = GetParam();
  Rng rng(test_seed());
  AttnCase c = make_case(rule.varlen ? varlen_spec() : fixed_spec(), rng);
  AttnArgs a = c.args(Backend::Auto);
  ASSERT_TRUE(validate_forward(a).ok()) << "the unmutated case must be valid";
  rule.mutate(a, c);
  expect_status(validate_forward(a), rule.code, rule.message, rule.name);
  expect_status(forward(a), rule.code, rule.message, rule.name);
  expect_untouched(c, rule.name);
}

INSTANTIATE_TEST_SUITE_P(Rules, ForwardValidation, ::testing::ValuesIn(forward_rules()),
                         [](const ::testing::TestParamInfo<Rule>& p) { return std::string(p.param.name); });

// Backward-only rules: mutate the gradient tensors (dout, dq, dk, dv) or drop lse.
struct GradRule {
  const char* name;
  std::function<void(AttnArgs&, Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv)> mutate;
  std::vector<const char*> message;
};

std::vector<GradRule> backward_rules() {
  using A = AttnArgs;
  using T = Tensor;
  return {
      {"lse_missing", [](A& a, T&, T&, T&, T&) { a.lse = Tensor{}; }, {"lse: required by backward"}},
      {"dout_null", [](A&, T& dout, T&, T&, T&) { dout.data = nullptr; }, {"dout: data pointer is null"}},
      {"dq_shape", [](A&, T&, T& dq, T&, T&) { dq.shape[1] = 7; }, {"dq: shape (2, 7, 4, 16) must equal q's shape (2, 8, 4, 16)"}},
      {"dk_dtype", [](A&, T&, T&, T& dk, T&) { dk.dtype = DType::F32; }, {"dk: dtype fp32 but expected fp16"}},
      {"dv_stride", [](A&, T&, T&, T&, T& dv) { dv.stride[3] = 4; }, {"dv: last dim must have unit stride"}},
      {"dv_device", [](A&, T&, T&, T&, T& dv) { dv.device = Device::CUDA; }, {"dv: on cuda:0 but q is on cpu"}},
      {"dout_rank", [](A&, T& dout, T&, T&, T&) { dout.ndim = 2; }, {"dout: expected 4 dims"}},
      {"forward_rule_applies", [](A& a, T&, T&, T&, T&) { a.window_left = -3; }, {"window_left"}},
      {"block_mask_rule_applies",
       [](A& a, T&, T&, T&, T&) {
         static std::vector<uint8_t> bytes;
         set_blocks(a, bytes, {1, 1, 1, 1}, 4, 16);
       },
       {"mask.blocks: dim 2 is 1 but must be >= ceil(seqlen_q 8 / block_q 4) = 2"}},
  };
}

class BackwardValidation : public ::testing::TestWithParam<GradRule> {};

TEST_P(BackwardValidation, RejectsWithoutWriting) {
  const GradRule& rule = GetParam();
  Rng rng(test_seed());
  AttnCase c = make_case(fixed_spec(), rng);
  AttnArgs a = c.args(Backend::CPU);
  Tensor dout = c.dout.view(), dq = c.dq.view(), dk = c.dk.view(), dv = c.dv.view();
  ASSERT_TRUE(validate_backward(a, dout, dq, dk, dv).ok());
  rule.mutate(a, dout, dq, dk, dv);
  expect_status(validate_backward(a, dout, dq, dk, dv), Code::InvalidArgument, rule.message, rule.name);
  expect_status(backward(a, dout, dq, dk, dv), Code::InvalidArgument, rule.message, rule.name);
  expect_untouched(c, rule.name);
}

INSTANTIATE_TEST_SUITE_P(Rules, BackwardValidation, ::testing::ValuesIn(backward_rules()),
                         [](const ::testing::TestParamInfo<GradRule>& p) { return std::string(p.param.name); });

TEST(Validation, BlockMaskLayoutsAccepted) {
  Rng rng(test_seed());
  for (bool is_varlen : {false, true}) {
    AttnCase c = make_case(is_varlen ? varlen_spec() : fixed_spec(), rng);
    AttnArgs a = c.args(Backend::CPU);
    const int64_t batch = is_varlen ? 3 : 2;
    // Exactly covering, padded dims, per-batch and per-head dims, 1 x 1 blocks.
    for (std::array<int64_t, 4> shape : {std::array<int64_t, 4>{1, 1, 1, 1}, {batch, 4, 1, 1}, {1, 2, 7, 9}}) {
      set_blocks(a, c.blocks.bytes, shape, 8, 10);
      EXPECT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
    }
    set_blocks(a, c.blocks.bytes, {batch, 1, 8, 10}, 1, 1);
    EXPECT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
    // Free strides: broadcast (0) and reversed (negative) dims read the same bytes.
    a.mask.blocks.stride[1] = 0;
    a.mask.blocks.stride[3] = -1;
    a.mask.blocks.data += 9;
    EXPECT_TRUE(validate_forward(a).ok()) << validate_forward(a).message;
    Tensor dout = c.dout.view(), dq = c.dq.view(), dk = c.dk.view(), dv = c.dv.view();
    EXPECT_TRUE(validate_backward(a, dout, dq, dk, dv).ok());
  }
}

TEST(Validation, ScaleNanMeansDefaultAndZeroIsAllowed) {
  Rng rng(test_seed());
  AttnCase c = make_case(fixed_spec(), rng);
  AttnArgs a = c.args(Backend::CPU);
  a.softmax_scale = NAN;
  EXPECT_TRUE(validate_forward(a).ok());
  a.softmax_scale = 0.0f;
  EXPECT_TRUE(validate_forward(a).ok());
  a.lse = Tensor{};  // optional in forward
  EXPECT_TRUE(forward(a).ok());
  EXPECT_EQ(c.lse.count_nan(), c.lse.numel());
  EXPECT_EQ(c.out.count_nan(), 0);
}

TEST(Validation, TypesHelpers) {
  EXPECT_STREQ(dtype_name(DType::F16), "fp16");
  EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
  EXPECT_STREQ(dtype_name(DType::F32), "fp32");
  EXPECT_EQ(dtype_size(DType::F16), 2);
  EXPECT_EQ(dtype_size(DType::BF16), 2);
  EXPECT_EQ(dtype_size(DType::F32), 4);
  float buf[1];
  const Tensor t = make_tensor(buf, DType::F32, {2, 3, 4, 5});
  EXPECT_EQ(t.ndim, 4);
  EXPECT_EQ(t.numel(), 120);
  EXPECT_EQ(t.stride[0], 60);
  EXPECT_EQ(t.stride[1], 20);
  EXPECT_EQ(t.stride[2], 5);
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_FALSE(cuda_available() && std::string(build_info()).find("built without CUDA") != std::string::npos);
  EXPECT_STREQ(version(), "0.1.0");
}

}  // namespace
}  // namespace fastattn::testing
