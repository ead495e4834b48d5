// Runs a KvCase (support/kv_case.h) through forward_kvcache on the GPU and checks it against the
// host model: the cache after the append (1 ulp on rotated elements, bit for bit elsewhere), out
// and lse against the float64 oracle with FA3's rule (baseline: P rounded to the input dtype).
// Shared by the KV-cache GPU tests (kvcache_test.cpp, kvcache_paged_test.cpp, kvcache_sm80_test.cpp),
// with the paged-equals-contiguous check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "fastattn/fastattn.h"
#include "gpu_buffers.h"
#include "menu_guard.h"
#include "support/compare.h"
#include "support/kv_case.h"

namespace fastattn::gputest {

// Device twins of a KvCase's tensors and index arrays.
struct DeviceKv {
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;

  Tensor put(const testing::HostTensor& h) {
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
  void get(const Tensor& t, testing::HostTensor& h) {
    cudaMemcpy(h.view().data, t.data, size_t(h.numel()) * dtype_size(h.dtype()), cudaMemcpyDeviceToHost);
  }
};

// The case's arguments on the device, out and lse poisoned (NaN), the page table when paged.
inline KvCacheArgs device_args(const testing::KvCase& c, DeviceKv& d) {
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
  testing::HostTensor poisoned_out = c.out, poisoned_lse = c.lse;
  poisoned_out.poison();
  poisoned_lse.poison();
  a.out = d.put(poisoned_out);
  a.lse = d.put(poisoned_lse);
  a.cache_seqlens = d.put(c.seqlens);
  a.cache_batch_idx = d.put(c.batch_idx);
  a.cache_leftpad = d.put(c.leftpad);
  if (h.page_table.defined()) a.page_table = {d.put(c.page_table).data, h.page_table.batch, h.page_table.pages_per_seq};
  if (h.alibi_slopes.defined()) a.alibi_slopes = d.put(c.slopes);
  return a;
}

// Runs `c` on the GPU (captured in a CUDA graph and replayed when `graph`: index arrays unchecked,
// caller's workspace) and downloads the cache, out and lse into `c`.
inline void run_gpu_kvcache(testing::KvCase& c, bool graph, const std::string& ctx) {
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
}

// `spec`'s call is refused by name (NotSupported, the message starting with `what`) before anything is written:
// the caches, out and lse as they were.
inline void expect_kvcache_refused(const testing::KvSpec& spec, const std::string& what) {
  testing::Rng rng(testing::test_seed());
  testing::KvCase c = testing::make_kv_case(spec, rng);
  DeviceKv d;
  const KvCacheArgs a = device_args(c, d);
  const std::vector<double> k_before = c.k_cache.to_f64(), v_before = c.v_cache.to_f64();
  const Status st = forward_kvcache(a);
  EXPECT_EQ(int(st.code), int(Code::NotSupported)) << st.message << "; " << spec.describe();
  EXPECT_EQ(st.message.rfind(what, 0), 0u) << st.message << "; " << spec.describe();
  FA_CUDA_OK(cudaDeviceSynchronize());
  d.get(a.k_cache, c.k_cache);
  d.get(a.v_cache, c.v_cache);
  d.get(a.out, c.out);
  d.get(a.lse, c.lse);
  EXPECT_TRUE(c.k_cache.to_f64() == k_before && c.v_cache.to_f64() == v_before) << "the cache was written";
  EXPECT_EQ(c.out.count_nan(), c.out.numel()) << "out was written";
  EXPECT_EQ(c.lse.count_nan(), c.lse.numel()) << "lse was written";
}

// Equal, or both NaN (a cache position outside every sequence's keys: KvSpec::nan_past_keys).
inline bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// `c` after its GPU run against the model's expectations `e` (and `base`, the oracle with P rounded
// to the dtype: FA3's baseline).
inline void check_gpu_results(const testing::KvCase& c, const testing::KvExpected& e, const testing::KvExpected& base,
                              const std::string& ctx) {
  const DType dt = c.spec.dtype;
  const std::vector<double> kc = c.k_cache.to_f64(), vc = c.v_cache.to_f64();
  for (size_t i = 0; i < kc.size(); ++i) {
    if (std::isnan(e.k_cache[i])) {  // outside every sequence's keys (KvSpec::nan_past_keys): untouched
      ASSERT_TRUE(std::isnan(kc[i])) << "k_cache[" << i << "]; " << ctx;
      continue;
    }
    const double tol = e.k_rotated[i] ? testing::ulp(dt, e.k_cache[i]) : 0.0;
    ASSERT_LE(std::fabs(kc[i] - e.k_cache[i]), tol) << "k_cache[" << i << "]; " << ctx;
  }
  for (size_t i = 0; i < vc.size(); ++i)
    ASSERT_TRUE(same_value(vc[i], e.v_cache[i])) << "v_cache[" << i << "] = " << vc[i] << " but expected "
                                                 << e.v_cache[i] << "; " << ctx;
  EXPECT_EQ(c.out.count_nan(), 0) << ctx;
  const testing::Comparison co = testing::compare(c.out.to_f64(), e.attn.out, testing::rounded(base.attn.out, dt),
                                                  testing::rounding_step(dt, e.attn.out));
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

// Runs `spec` (fresh random inputs) on the GPU and checks everything against the model.
inline void check_gpu_kvcache(const testing::KvSpec& spec, bool graph = false) {
  if (!case_in_menu(cuda_backend::KernelFamily::Forward, spec.dtype, spec.head_dim, spec.head_dim_v)) return;
  const uint64_t seed = testing::test_seed();
  testing::Rng rng(seed);
  testing::KvCase c = testing::make_kv_case(spec, rng);
  const std::string ctx = spec.describe() + (graph ? ", graph" : "") + ", " + testing::seed_note(seed);
  reference::Options low;
  low.round_p_to_input_dtype = true;
  const testing::KvExpected e = testing::expected_kvcache(c), base = testing::expected_kvcache(c, low);
  if (spec.nan_past_keys) {
    ASSERT_GT(c.v_cache.count_nan(), 0) << "no NaN past the keys; " << ctx;
  }
  run_gpu_kvcache(c, graph, ctx);
  if (::testing::Test::HasFatalFailure()) return;
  check_gpu_results(c, e, base, ctx);
}

// Index of the first element where a and b differ (bit for bit: both are exact float64 copies), or -1.
inline int64_t first_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return int64_t(i);
  }
  return -1;
}

// Element (b, pos, h, x) of a case's cache through its own layout (row or page).
inline double cache_at(const testing::KvCase& c, const testing::HostTensor& t, int b, int64_t pos, int64_t h,
                       int64_t x) {
  const auto [row, at] = c.slot(b, pos);
  const Tensor& v = t.view();
  return t.get(((row * v.shape[1] + at) * v.shape[2] + h) * v.shape[3] + x);
}

// The contiguous case on the GPU against the model, then the same logical problem paged (one page
// order drawn per size) on the GPU: the same bits.
inline void check_paged_equals_contiguous(const testing::KvSpec& spec, std::initializer_list<int> page_sizes,
                                          bool graph = false) {
  if (!case_in_menu(cuda_backend::KernelFamily::Forward, spec.dtype, spec.head_dim, spec.head_dim_v)) return;
  const uint64_t seed = testing::test_seed();
  testing::Rng rng(seed);
  const testing::KvCase c = testing::make_kv_case(spec, rng);
  const std::string ctx = spec.describe() + (graph ? ", graph" : "") + ", " + testing::seed_note(seed);
  reference::Options low;
  low.round_p_to_input_dtype = true;
  testing::KvCase flat = c;
  run_gpu_kvcache(flat, graph, ctx);
  if (::testing::Test::HasFatalFailure()) return;
  check_gpu_results(flat, testing::expected_kvcache(c), testing::expected_kvcache(c, low), ctx);

  for (int page : page_sizes) {
    testing::KvCase paged = testing::to_paged(c, page, rng);
    const std::string pctx = "page " + std::to_string(page) + ", " + ctx;
    run_gpu_kvcache(paged, graph, pctx);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(first_difference(paged.out.to_f64(), flat.out.to_f64()), -1) << "out; " << pctx;
    EXPECT_EQ(first_difference(paged.lse.to_f64(), flat.lse.to_f64()), -1) << "lse; " << pctx;
    for (int b = 0; b < spec.batch; ++b) {
      for (int64_t pos = 0; pos < spec.seqlen_cache; ++pos) {
        for (int64_t h = 0; h < spec.heads_kv; ++h) {
          for (int64_t x = 0; x < spec.head_dim; ++x) {
            const double pk = cache_at(paged, paged.k_cache, b, pos, h, x), fk = cache_at(flat, flat.k_cache, b, pos, h, x);
            ASSERT_TRUE(same_value(pk, fk)) << "k_cache (" << b << ", " << pos << ", " << h << ", " << x << "); " << pctx;
          }
          for (int64_t x = 0; x < spec.head_dim_v; ++x) {
            const double pv = cache_at(paged, paged.v_cache, b, pos, h, x), fv = cache_at(flat, flat.v_cache, b, pos, h, x);
            ASSERT_TRUE(same_value(pv, fv)) << "v_cache (" << b << ", " << pos << ", " << h << ", " << x << "); " << pctx;
          }
        }
      }
    }
  }
}

}  // namespace fastattn::gputest
