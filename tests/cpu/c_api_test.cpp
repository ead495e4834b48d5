// The C ABI: defaults, a forward/backward round trip identical to the C++ API, errors with
// thread-local messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "fastattn/c_api.h"
#include "fastattn/fastattn.h"
#include "support/attn_case.h"
#include "support/kv_case.h"

namespace fastattn::testing {
namespace {

fastattn_tensor to_c(const Tensor& t) {
  fastattn_tensor c{};
  c.data = t.data;
  c.ndim = t.ndim;
  for (int i = 0; i < 4; ++i) {
    c.shape[i] = t.shape[i];
    c.stride[i] = t.stride[i];
  }
  c.dtype = int32_t(t.dtype);
  c.device = int32_t(t.device);
  c.device_index = t.device_index;
  return c;
}

fastattn_args to_c(const AttnCase& c) {
  fastattn_args a;
  fastattn_args_init(&a);
  a.q = to_c(c.q.view());
  a.k = to_c(c.k.view());
  a.v = to_c(c.v.view());
  a.out = to_c(c.out.view());
  a.lse = to_c(c.lse.view());
  if (c.spec.varlen()) {
    a.cu_seqlens_q = c.cu_q.data();
    a.cu_seqlens_k = c.cu_k.data();
    a.cu_seqlens_size = int64_t(c.cu_q.size());
  }
  if (!c.used_q.empty()) a.seqused_q = c.used_q.data();
  if (!c.used_k.empty()) a.seqused_k = c.used_k.data();
  a.causal = c.spec.causal;
  a.window_left = c.spec.window_left;
  a.window_right = c.spec.window_right;
  a.softcap = c.spec.softcap;
  a.backend = FASTATTN_BACKEND_CPU;
  if (c.blocks.defined()) {
    const BlockMask m = c.blocks.view_at();
    a.block_mask.data = m.data;
    for (int i = 0; i < 4; ++i) {
      a.block_mask.shape[i] = m.shape[i];
      a.block_mask.stride[i] = m.stride[i];
    }
    a.block_mask.device = int32_t(m.device);
    a.block_mask.block_q = m.block_q;
    a.block_mask.block_k = m.block_k;
  }
  if (c.bits.defined()) {
    const BitMask m = c.bits.view_at();
    a.bit_mask.data = m.data;
    for (int i = 0; i < 4; ++i) a.bit_mask.shape[i] = m.shape[i];
    for (int i = 0; i < 3; ++i) a.bit_mask.stride[i] = m.stride[i];
    a.bit_mask.device = int32_t(m.device);
  }
  if (c.bias.defined()) a.bias = to_c(c.bias.view());
  if (c.dbias.view().ndim == 4) a.dbias = to_c(c.dbias.view());
  if (c.spec.alibi != 0) a.alibi_slopes = to_c(c.alibi.view());
  return a;
}

TEST(CApi, InitSetsDefaults) {
  fastattn_args a;
  std::memset(&a, 0x5a, sizeof a);
  fastattn_args_init(&a);
  EXPECT_TRUE(std::isnan(a.softmax_scale));
  EXPECT_EQ(a.window_left, -1);
  EXPECT_EQ(a.window_right, -1);
  EXPECT_EQ(a.backend, FASTATTN_AUTO);
  EXPECT_EQ(a.causal, 0);
  EXPECT_EQ(a.check_index_arrays, 1);
  EXPECT_EQ(a.cu_seqlens_q, nullptr);
  EXPECT_EQ(a.lse.data, nullptr);
  EXPECT_EQ(a.softcap, 0.0f);
  EXPECT_EQ(a.block_mask.data, nullptr);
  EXPECT_EQ(a.block_mask.block_q, 128);
  EXPECT_EQ(a.block_mask.block_k, 128);
  EXPECT_EQ(a.block_mask.device, FASTATTN_CPU);
  EXPECT_EQ(a.bit_mask.data, nullptr);
  EXPECT_EQ(a.bit_mask.device, FASTATTN_CPU);
  EXPECT_EQ(a.bias.data, nullptr);
  EXPECT_EQ(a.dbias.data, nullptr);
  EXPECT_EQ(a.alibi_slopes.data, nullptr);
}

// Same results through the C ABI as through the C++ API, bit for bit (the CPU backend is
// deterministic), for a fixed and a varlen + seqused problem, with masks, a bias, ALiBi.
TEST(CApi, RoundTripMatchesCppApi) {
  for (int variant = 0; variant < 6; ++variant) {
    const bool use_varlen = variant & 1, use_blocks = (variant & 6) == 2, use_bits = (variant & 6) == 4;
    const bool use_bias = variant >= 3;  // alone (varlen + blocks, bits, varlen + bits), with dbias
    const uint64_t seed = test_seed();
    Rng rng(seed);
    CaseSpec spec;
    spec.batch = 2;
    spec.seqlen_q = 19;
    spec.seqlen_k = 23;
    spec.heads_q = 4;
    spec.heads_kv = 2;
    spec.head_dim = 32;
    spec.head_dim_v = 16;
    spec.dtype = DType::BF16;
    spec.causal = true;
    spec.window_left = 6;
    spec.softcap = 5.0f;
    if (use_varlen) {
      spec.lens_q = {19, 0, 7};
      spec.lens_k = {23, 4, 7};
      spec.used_k = {20, 4, 3};
    }
    if (use_blocks) {  // per batch entry and KV head, reversed key blocks
      spec.blocks.on = true;
      spec.blocks.per_batch = true;
      spec.blocks.heads = 2;
      spec.blocks.block_q = 4;
      spec.blocks.block_k = 5;
      spec.blocks.density = 0.6f;
      spec.blocks.layout = 2;
    }
    if (use_bits) {  // per KV head, rows padded
      spec.bits.on = true;
      spec.bits.heads = 2;
      spec.bits.density = 0.6f;
      spec.bits.layout = 1;
    }
    if (use_bias) {  // per batch entry, one per KV head, bf16, padded rows
      spec.bias.on = true;
      spec.bias.per_batch = true;
      spec.bias.heads = 2;
      spec.bias.dtype = DType::BF16;
      spec.bias.layout = 1;
      spec.bias.grad = true;
    }
    spec.alibi = variant % 3 == 0 ? 0 : 1 + variant % 2;  // ALiBi slopes (h) or (batch, h) on 4 of the 6
    AttnCase c = make_case(spec, rng), cpp = c;  // copies own their buffers
    const AttnArgs a = cpp.args(Backend::CPU);
    ASSERT_TRUE(forward(a).ok());
    ASSERT_TRUE(backward(a, cpp.dout.view(), cpp.dq.view(), cpp.dk.view(), cpp.dv.view()).ok());

    const fastattn_args ca = to_c(c);
    ASSERT_EQ(fastattn_forward(&ca, nullptr), FASTATTN_OK) << fastattn_last_error();
    const fastattn_tensor dout = to_c(c.dout.view()), dq = to_c(c.dq.view()), dk = to_c(c.dk.view()),
                          dv = to_c(c.dv.view());
    ASSERT_EQ(fastattn_backward(&ca, &dout, &dq, &dk, &dv, nullptr), FASTATTN_OK) << fastattn_last_error();
    EXPECT_STREQ(fastattn_last_error(), "");

    const std::pair<const HostTensor*, const HostTensor*> pairs[] = {
        {&c.out, &cpp.out}, {&c.lse, &cpp.lse}, {&c.dq, &cpp.dq}, {&c.dk, &cpp.dk}, {&c.dv, &cpp.dv},
        {&c.dbias, &cpp.dbias}};
    for (const auto& [got, want] : pairs) {
      if (got->view().ndim == 0) continue;  // no dbias without a bias
      ASSERT_EQ(got->count_nan(), 0) << seed_note(seed);
      const std::vector<double> g = got->to_f64(), w = want->to_f64();
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << i << "; " << seed_note(seed);
    }
  }
}

TEST(CApi, BiasErrorsNameTheBias) {
  Rng rng(test_seed());
  CaseSpec spec;
  spec.batch = 2;
  spec.bias.on = true;
  spec.bias.grad = true;
  AttnCase c = make_case(spec, rng);
  fastattn_args a = to_c(c);
  a.bias.shape[0] = 3;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("bias: dim 0 (bias_batch) is 3"), std::string::npos)
      << fastattn_last_error();
  a = to_c(c);
  a.bias.ndim = 5;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("bias: ndim 5"), std::string::npos) << fastattn_last_error();
  a = to_c(c);
  a.dbias.dtype = FASTATTN_BF16;
  const fastattn_tensor dout = to_c(c.dout.view()), dq = to_c(c.dq.view()), dk = to_c(c.dk.view()),
                        dv = to_c(c.dv.view());
  EXPECT_EQ(fastattn_backward(&a, &dout, &dq, &dk, &dv, nullptr), FASTATTN_NOT_SUPPORTED);
  EXPECT_NE(std::string(fastattn_last_error()).find("dbias: dtype bf16"), std::string::npos) << fastattn_last_error();
  EXPECT_EQ(c.out.count_nan(), c.out.numel());
  EXPECT_EQ(c.dbias.count_nan(), c.dbias.numel());
}

TEST(CApi, BlockMaskErrorsNameTheMask) {
  Rng rng(test_seed());
  CaseSpec spec;
  spec.batch = 2;
  spec.blocks.on = true;
  spec.blocks.block_q = 8;
  spec.blocks.block_k = 8;
  AttnCase c = make_case(spec, rng);
  fastattn_args a = to_c(c);
  a.block_mask.shape[0] = 3;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("mask.blocks: dim 0 (mask_batch) is 3"), std::string::npos)
      << fastattn_last_error();
  a = to_c(c);
  a.block_mask.device = FASTATTN_CUDA;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("mask.blocks: on cuda:0 but q is on cpu"), std::string::npos);
  EXPECT_EQ(c.out.count_nan(), c.out.numel());
}

// The element bitmask's errors through the C ABI: each names mask.bits, the forward and the backward
// write nothing. seqlen_k 40 needs 2 words a row; seqlen_q 16 rows.
TEST(CApi, BitMaskErrorsNameTheMask) {
  Rng rng(test_seed());
  CaseSpec spec;
  spec.batch = 2;
  spec.seqlen_k = 40;
  spec.bits.on = true;
  AttnCase c = make_case(spec, rng);
  auto expect_refused = [&](fastattn_args& a, const char* want) {
    EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT) << want;
    EXPECT_NE(std::string(fastattn_last_error()).find(want), std::string::npos) << fastattn_last_error();
    const fastattn_tensor dout = to_c(c.dout.view()), dq = to_c(c.dq.view()), dk = to_c(c.dk.view()),
                          dv = to_c(c.dv.view());
    EXPECT_EQ(fastattn_backward(&a, &dout, &dq, &dk, &dv, nullptr), FASTATTN_INVALID_ARGUMENT) << want;
    EXPECT_NE(std::string(fastattn_last_error()).find(want), std::string::npos) << fastattn_last_error();
  };
  fastattn_args a = to_c(c);
  a.bit_mask.shape[3] = 1;  // one word covers 32 of the 40 keys
  expect_refused(a, "mask.bits: dim 3 (words) is 1 but must be >= ceil(seqlen_k 40 / 32) = 2");
  a = to_c(c);
  a.bit_mask.shape[2] = 15;
  expect_refused(a, "mask.bits: dim 2 (rows) is 15 but must be >= seqlen_q 16");
  a = to_c(c);
  a.bit_mask.shape[0] = 3;
  expect_refused(a, "mask.bits: dim 0 (mask_batch) is 3 but must be 1 (shared) or batch 2");
  a = to_c(c);
  a.bit_mask.device = 7;
  expect_refused(a, "mask.bits: unknown device code 7");
  a = to_c(c);
  a.bit_mask.device = FASTATTN_CUDA;
  expect_refused(a, "mask.bits: on cuda:0 but q is on cpu");
  a = to_c(c);  // words from a byte buffer at an odd offset
  a.bit_mask.data = reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(a.bit_mask.data) + 1);
  expect_refused(a, "mask.bits: data is not 4-byte aligned");
  a = to_c(c);  // both masks: one kind a call
  const uint8_t keep_all = 1;
  a.block_mask.data = &keep_all;
  for (int i = 0; i < 4; ++i) a.block_mask.shape[i] = 1;
  expect_refused(a, "mask.bits: given together with a block-sparse mask");
  for (const HostTensor* t : {&c.out, &c.dq, &c.dk, &c.dv}) EXPECT_EQ(t->count_nan(), t->numel());
}

TEST(CApi, ErrorsAreReportedPerThread) {
  Rng rng(test_seed());
  AttnCase c = make_case(CaseSpec{}, rng);
  fastattn_args a = to_c(c);
  a.window_left = -4;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  const std::string mine = fastattn_last_error();
  EXPECT_NE(mine.find("window_left"), std::string::npos) << mine;
  EXPECT_EQ(c.out.count_nan(), c.out.numel());

  std::string other;
  std::thread t([&] {
    fastattn_args b = to_c(c);
    b.softcap = -1.0f;
    EXPECT_EQ(fastattn_forward(&b, nullptr), FASTATTN_INVALID_ARGUMENT);
    other = fastattn_last_error();
  });
  t.join();
  EXPECT_NE(other.find("softcap"), std::string::npos) << other;
  EXPECT_EQ(std::string(fastattn_last_error()), mine);  // untouched by the other thread

  a.window_left = -1;
  a.q.ndim = 9;
  EXPECT_EQ(fastattn_forward(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("q: ndim 9 out of range"), std::string::npos);
  EXPECT_EQ(fastattn_forward(nullptr, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_EQ(fastattn_backward(&a, nullptr, nullptr, nullptr, nullptr, nullptr), FASTATTN_INVALID_ARGUMENT);

  a = to_c(c);
  a.backend = FASTATTN_BACKEND_CPU;
  fastattn_args m = a;
  m.q.dtype = FASTATTN_F32;
  m.k.dtype = FASTATTN_F16;
  EXPECT_EQ(fastattn_forward(&m, nullptr), FASTATTN_INVALID_ARGUMENT);
}

TEST(CApi, BuildQueries) {
  EXPECT_STREQ(fastattn_version(), fastattn::version());
  EXPECT_EQ(fastattn_abi_version(), FASTATTN_ABI_VERSION);
  EXPECT_GT(std::strlen(fastattn_build_info()), 10u);
  EXPECT_EQ(fastattn_cuda_available(), fastattn::cuda_available() ? 1 : 0);
#ifndef FASTATTN_WITH_CUDA
  EXPECT_EQ(fastattn_cuda_available(), 0);
  EXPECT_NE(std::string(fastattn_build_info()).find("built without CUDA"), std::string::npos);
#endif
}

// The KV-cache call through the C ABI: the same bits as the C++ API (cache and out; with ALiBi slopes a
// (batch, head), ABI 3's field), and its errors reported like forward's.
TEST(CApi, KvCacheMatchesCppApi) {
  KvSpec s;
  s.batch = 2;
  s.seqlens = {3, 40};
  s.seqlen_new = 2;
  s.seqlen_q = 2;
  s.page_size = 16;
  s.rotary_dim = 16;
  s.interleaved = false;
  s.causal = true;
  s.alibi = 2;
  Rng rng(test_seed());
  KvCase cpp = make_kv_case(s, rng);
  KvCase c = cpp;  // same inputs and cache
  ASSERT_TRUE(forward_kvcache(cpp.args()).ok());

  fastattn_kvcache_args a;
  fastattn_kvcache_args_init(&a);
  EXPECT_EQ(a.rotary_interleaved, 1);
  EXPECT_TRUE(std::isnan(a.softmax_scale));
  EXPECT_EQ(a.alibi_slopes.data, nullptr);
  a.q = to_c(c.q.view());
  a.k_cache = to_c(c.k_cache.view());
  a.v_cache = to_c(c.v_cache.view());
  a.k_new = to_c(c.k_new.view());
  a.v_new = to_c(c.v_new.view());
  a.out = to_c(c.out.view());
  a.lse = to_c(c.lse.view());
  a.rotary_cos = to_c(c.cos.view());
  a.rotary_sin = to_c(c.sin.view());
  a.alibi_slopes = to_c(c.slopes.view());
  a.batch = s.batch;
  a.cache_seqlens = c.seqlens.data();
  a.page_table = c.page_table.data();
  a.pages_per_seq = c.pages_per_seq();
  a.rotary_interleaved = 0;
  a.causal = 1;
  a.backend = FASTATTN_BACKEND_CPU;
  ASSERT_EQ(fastattn_forward_kvcache(&a, nullptr), FASTATTN_OK) << fastattn_last_error();
  EXPECT_EQ(c.out.to_f64(), cpp.out.to_f64());
  EXPECT_EQ(c.lse.to_f64(), cpp.lse.to_f64());
  EXPECT_EQ(c.k_cache.to_f64(), cpp.k_cache.to_f64());
  EXPECT_EQ(c.v_cache.to_f64(), cpp.v_cache.to_f64());
  EXPECT_EQ(fastattn_kvcache_workspace_bytes(&a), 0u);  // host backends need none

  a.num_splits = -2;
  EXPECT_EQ(fastattn_forward_kvcache(&a, nullptr), FASTATTN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fastattn_last_error()).find("num_splits"), std::string::npos);
  EXPECT_EQ(fastattn_forward_kvcache(nullptr, nullptr), FASTATTN_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace fastattn::testing
