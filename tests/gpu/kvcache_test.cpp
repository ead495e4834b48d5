// forward_kvcache on the CUDA backend against the host model (support/kv_case.h): the append and
// rotary kernel's cache contents (1 ulp on rotated elements, bit for bit elsewhere), out and lse
// against the float64 oracle with FA3's rule (baseline: P rounded to the input dtype), every
// cache_seqlens edge, s_new 0 and > 0, and a CUDA-graph capture + replay of a decode step.
// The features the GPU kernel cannot express yet must say so (NotSupported naming the argument).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "util/half.h"
#include "fastattn/fastattn.h"
#include "gpu_buffers.h"
#include "support/compare.h"
#include "support/kv_case.h"

namespace fastattn::gputest {
namespace {

using testing::HostTensor;
using testing::KvCase;
using testing::KvSpec;

// Device twins of a KvCase's tensors and index arrays.
struct DeviceKv {
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;

  Tensor put(const HostTensor& h) {
    const size_t bytes = size_t(std::max<int64_t>(h.numel(), 1)) * dtype_size(h.dtype());
    bufs.push_back(std::make_unique<DeviceBuffer>(bytes));
    bufs.back()->upload(h.view().data);
    Tensor t = h.view();
    t.data = bufs.back()->get();
    t.device = Device::CUDA;
    return t;
  }
  IndexArray put(const std::vector<int32_t>& v) {
    if (v.empty()) return {};
    bufs.push_back(std::make_unique<DeviceBuffer>(v.size() * 4));
    bufs.back()->upload(v.data());
    return {static_cast<const int32_t*>(bufs.back()->get()), int64_t(v.size())};
  }
  void get(const Tensor& t, HostTensor& h) {
    cudaMemcpy(h.view().data, t.data, size_t(h.numel()) * dtype_size(h.dtype()), cudaMemcpyDeviceToHost);
  }
};

KvCacheArgs device_args(const KvCase& c, DeviceKv& d) {
  KvCacheArgs h = c.args(Backend::CUDA);
  KvCacheArgs a = h;
  a.q = d.put(c.q);
  a.k_cache = d.put(c.k_cache);
  a.v_cache = d.put(c.v_cache);
  if (h.k_new.defined()) {
    a.k_new = d.put(c.k_new);
    a.v_new = d.put(c.v_new);
  }
  if (h.rotary_cos.defined()) {
    a.rotary_cos = d.put(c.cos);
    a.rotary_sin = d.put(c.sin);
  }
  HostTensor poisoned_out = c.out, poisoned_lse = c.lse;
  poisoned_out.poison();
  poisoned_lse.poison();
  a.out = d.put(poisoned_out);
  a.lse = d.put(poisoned_lse);
  a.cache_seqlens = d.put(c.seqlens);
  a.cache_batch_idx = d.put(c.batch_idx);
  a.cache_leftpad = d.put(c.leftpad);
  return a;
}



// Runs `c` on the GPU (captured in a CUDA graph and replayed when `graph`) and checks everything.
void check_gpu_kvcache(const KvSpec& spec, bool graph = false) {
  const uint64_t seed = testing::test_seed();
  testing::Rng rng(seed);
  KvCase c = testing::make_kv_case(spec, rng);
  const std::string ctx = spec.describe() + (graph ? ", graph" : "") + ", " + testing::seed_note(seed);
  reference::Options low;
  low.round_p_to_input_dtype = true;
  const testing::KvExpected e = testing::expected_kvcache(c), base = testing::expected_kvcache(c, low);

  DeviceKv d;
  KvCacheArgs a = device_args(c, d);
  Status st;
  if (graph) {
    DeviceBuffer ws(kvcache_workspace_bytes(a));
    a.workspace = ws.get();
    a.workspace_bytes = ws.bytes();
    a.check_index_arrays = false;
    cudaStream_t s;
    FA_CUDA_OK(cudaStreamCreate(&s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    FA_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    st = forward_kvcache(a, s);
    FA_CUDA_OK(cudaStreamEndCapture(s, &g));
    ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;
    FA_CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    FA_CUDA_OK(cudaGraphLaunch(ge, s));
    FA_CUDA_OK(cudaStreamSynchronize(s));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  } else {
    st = forward_kvcache(a, nullptr);
    ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;
  }
  FA_CUDA_OK(cudaDeviceSynchronize());
  d.get(a.k_cache, c.k_cache);
  d.get(a.v_cache, c.v_cache);
  d.get(a.out, c.out);
  d.get(a.lse, c.lse);

  const std::vector<double> kc = c.k_cache.to_f64(), vc = c.v_cache.to_f64();
  for (size_t i = 0; i < kc.size(); ++i) {
    const double tol = e.k_rotated[i] ? testing::ulp(spec.dtype, e.k_cache[i]) : 0.0;
    ASSERT_LE(std::fabs(kc[i] - e.k_cache[i]), tol) << "k_cache[" << i << "]; " << ctx;
  }
  for (size_t i = 0; i < vc.size(); ++i) ASSERT_EQ(vc[i], e.v_cache[i]) << "v_cache[" << i << "]; " << ctx;
  EXPECT_EQ(c.out.count_nan(), 0) << ctx;
  const testing::Comparison co = testing::compare(c.out.to_f64(), e.attn.out, testing::rounded(base.attn.out, spec.dtype),
                                                  testing::rounding_step(spec.dtype, e.attn.out));
  EXPECT_TRUE(co.ok) << co.describe("out") << "; " << ctx;
  const std::vector<double> lse = c.lse.to_f64();
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(e.attn.lse[i])) {
      ASSERT_EQ(lse[i], e.attn.lse[i]) << "lse[" << i << "]; " << ctx;
    } else {
      ASSERT_NEAR(lse[i], e.attn.lse[i], 1e-4 * std::max(1.0, std::fabs(e.attn.lse[i]))) << "lse[" << i << "]; " << ctx;
    }
  }
}

KvSpec decode() {
  KvSpec s;
  s.batch = 3;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = s.head_dim_v = 128;
  s.dtype = DType::BF16;
  s.seqlen_cache = 512;
  s.seqlens = {0, 1, 511};  // empty, one token, full after the append
  s.seqlen_new = 1;
  return s;
}

class KvCacheGpu : public HopperTest {};

TEST_F(KvCacheGpu, DecodeSeqlenEdges) {
  KvSpec s = decode();
  check_gpu_kvcache(s);
  s.causal = true;
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, NoNewTokens) {
  KvSpec s = decode();
  s.seqlen_new = 0;
  s.seqlens = {0, 200, 512};
  check_gpu_kvcache(s);
  s.pass_new = false;
  s.seqlens = {};
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, AppendWithRotary) {
  KvSpec s = decode();
  s.seqlens = {0, 17, 400};
  s.seqlen_new = 4;
  s.seqlen_q = 4;
  s.rotary_dim = 64;
  s.causal = true;
  check_gpu_kvcache(s);  // interleaved, causal: q rows advance
  s.interleaved = false;
  s.causal = false;
  s.seqlen_q = 3;
  s.dtype = DType::F16;
  check_gpu_kvcache(s);  // GPT-NeoX pairs, every q row at position n
  s.rotary_dim = 128;
  s.window_left = 33;
  s.window_right = 0;
  check_gpu_kvcache(s);  // full-width rotary, local window
}

TEST_F(KvCacheGpu, OddLengthsAndCacheRows) {
  KvSpec s = decode();
  s.batch = 2;
  s.cache_batch = 5;  // rows past the batch stay untouched
  s.seqlen_cache = 4097;
  s.seqlens = {113, 4000};
  s.seqlen_new = 17;
  s.seqlen_q = 17;
  s.rotary_dim = 32;
  s.causal = true;
  s.softcap = 20.0f;
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, GraphCaptureAndReplay) {
  KvSpec s = decode();
  s.rotary_dim = 64;
  s.causal = true;
  check_gpu_kvcache(s, /*graph=*/true);
}

// Split-KV through forward_kvcache (device seqused_k from the append kernel): the heuristic and
// forced counts, more splits than key blocks, sequences with no key, and a captured decode step.
TEST_F(KvCacheGpu, DecodeWithSplits) {
  KvSpec s = decode();
  s.heads_q = 32;
  s.heads_kv = 8;
  s.seqlen_cache = 4097;
  s.seqlens = {0, 1, 4000};
  for (int splits : {0, 5, 64}) {
    s.num_splits = splits;
    check_gpu_kvcache(s);
  }
  s.num_splits = 3;
  s.seqlen_q = s.seqlen_new = 4;
  s.causal = true;
  check_gpu_kvcache(s);
  s.seqlen_q = s.seqlen_new = 1;
  s.causal = false;
  s.num_splits = 0;
  check_gpu_kvcache(s, /*graph=*/true);
}

TEST_F(KvCacheGpu, HostOnlyFeaturesSaySo) {
  testing::Rng rng(testing::test_seed());
  KvSpec s = decode();
  s.page_size = 16;
  s.seqlen_cache = 64;
  s.seqlens = {0, 1, 20};
  KvCase paged = testing::make_kv_case(s, rng);
  DeviceKv d;
  KvCacheArgs a = device_args(paged, d);
  a.page_table = {d.put(paged.page_table).data, s.batch, paged.pages_per_seq()};
  Status st = forward_kvcache(a);
  EXPECT_EQ(int(st.code), int(Code::NotSupported)) << st.message;
  EXPECT_NE(st.message.find("page_table: the CUDA backend does not take it yet"), std::string::npos) << st.message;

  s = decode();
  s.cache_batch = 4;
  s.batch_idx = {3, 0, 1};
  KvCase indexed = testing::make_kv_case(s, rng);
  KvCacheArgs b = device_args(indexed, d);
  st = forward_kvcache(b);
  EXPECT_NE(st.message.find("cache_batch_idx: the CUDA backend does not take it yet"), std::string::npos) << st.message;

  s = decode();
  s.leftpad = {0, 1, 5};
  KvCase padded = testing::make_kv_case(s, rng);
  KvCacheArgs l = device_args(padded, d);
  st = forward_kvcache(l);
  EXPECT_NE(st.message.find("cache_leftpad: the CUDA backend does not take it yet"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace fastattn::gputest
