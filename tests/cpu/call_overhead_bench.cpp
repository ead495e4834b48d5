// Host cost of one API call, without the kernel's work: validation + problem resolution
// (validate_forward), and the whole forward() on a problem so small that the CPU backend's work is
// a few dot products (b 1, s 1, h 1, d 8). Fixed-length and varlen, and forward_kvcache's decode
// step. Prints microseconds per call (best of 5 runs of N calls): fastattn_call_overhead_bench [N]
// With CUDA and a GPU, also the CUDA backend's host cost: bf16 b 1, s 128, h 16/4, d 128 causal
// (the kernel takes a few microseconds, so N calls without a sync measure the host's share), and
// forward_kvcache's decode step (b 1, h 32/8, d 128, 128 cached keys, caller's workspace), and the
// split decode at 4096 keys in runs short enough that the launch queue never waits on the GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#ifdef FASTATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "fastattn/fastattn.h"
#include "support/attn_case.h"
#include "support/kv_case.h"

using namespace fastattn;

namespace {

template <typename Fn>
double us_per_call(int n, Fn&& fn) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s / n * 1e6);
  }
  return best;
}

#ifdef FASTATTN_WITH_CUDA
void* device_zeros(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  cudaMemset(p, 0, bytes);
  return p;
}

// Host microseconds per CUDA call (the stream is synchronised once per run of n calls).
int cuda_section(int n) {
  if (!cuda_available()) return std::printf("CUDA: no device, skipped\n"), 0;
  const int64_t b = 1, s = 128, h = 16, hk = 4, d = 128;
  AttnArgs a;
  a.q = make_tensor(device_zeros(b * s * h * d * 2), DType::BF16, {b, s, h, d}, Device::CUDA);
  a.k = make_tensor(device_zeros(b * s * hk * d * 2), DType::BF16, {b, s, hk, d}, Device::CUDA);
  a.v = make_tensor(device_zeros(b * s * hk * d * 2), DType::BF16, {b, s, hk, d}, Device::CUDA);
  a.out = make_tensor(device_zeros(b * s * h * d * 2), DType::BF16, {b, s, h, d}, Device::CUDA);
  a.lse = make_tensor(device_zeros(b * h * s * 4), DType::F32, {b, h, s}, Device::CUDA);
  a.causal = true;
  Status st;
  // Runs of at most 500 calls, the device drained before each and not waited on inside it: the
  // launch queue never fills, so the time is the host's (best of 5 runs).
  const int calls = std::min(n, 500);
  auto timed = [&](auto&& fn, int run = 0) {
    run = run > 0 ? run : calls;
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < run; ++i) fn();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, secs / run * 1e6);
    }
    return best;
  };
  const double v = timed([&] { st = validate_forward(a); });
  const double f = timed([&] { st = forward(a); });
  cudaDeviceSynchronize();
  if (!st.ok()) return std::printf("CUDA forward failed: %s\n", st.message.c_str()), 1;

  // forward_kvcache's decode step over `cache` keys (cache - 1 held, one appended), h 32/8.
  auto decode_args = [&](int64_t cache) {
    KvCacheArgs k;
    const int64_t kh = 32, kk = 8;
    k.q = make_tensor(device_zeros(kh * d * 2), DType::BF16, {1, 1, kh, d}, Device::CUDA);
    k.k_cache = make_tensor(device_zeros(cache * kk * d * 2), DType::BF16, {1, cache, kk, d}, Device::CUDA);
    k.v_cache = make_tensor(device_zeros(cache * kk * d * 2), DType::BF16, {1, cache, kk, d}, Device::CUDA);
    k.k_new = make_tensor(device_zeros(kk * d * 2), DType::BF16, {1, 1, kk, d}, Device::CUDA);
    k.v_new = make_tensor(device_zeros(kk * d * 2), DType::BF16, {1, 1, kk, d}, Device::CUDA);
    k.out = make_tensor(device_zeros(kh * d * 2), DType::BF16, {1, 1, kh, d}, Device::CUDA);
    const int32_t n_cached = int32_t(cache - 1);
    auto* seqlens = static_cast<int32_t*>(device_zeros(4));
    cudaMemcpy(seqlens, &n_cached, 4, cudaMemcpyHostToDevice);
    k.cache_seqlens = {seqlens, 1};
    k.causal = true;
    k.check_index_arrays = false;
    k.workspace_bytes = kvcache_workspace_bytes(k);
    k.workspace = device_zeros(k.workspace_bytes);
    return k;
  };
  const KvCacheArgs k = decode_args(128);
  const double kv = timed([&] { st = forward_kvcache(k); });
  cudaDeviceSynchronize();
  if (!st.ok()) return std::printf("CUDA forward_kvcache failed: %s\n", st.message.c_str()), 1;
  // The split decode (4096 keys: the heuristic's 8 splits, merged in clusters) plans its split count,
  // cluster rule and schedule on the host; its GPU time (~12 us on the H100) exceeds the host's, so
  // runs of 64 calls, which the launch queue holds without waiting.
  const KvCacheArgs ks = decode_args(4096);
  const double kvs = timed([&] { st = forward_kvcache(ks); }, 64);
  cudaDeviceSynchronize();
  if (!st.ok()) return std::printf("CUDA forward_kvcache (split) failed: %s\n", st.message.c_str()), 1;
  std::printf("CUDA backend host cost per call (us), bf16 b1 s128 h16/4 d128 causal:\n");
  std::printf("  validate_forward %6.2f   forward %6.2f   forward_kvcache (decode, 128 keys) %6.2f\n", v, f, kv);
  std::printf("  forward_kvcache (split decode, 4096 keys, 64-call runs) %6.2f\n", kvs);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  testing::Rng rng(1);
  testing::CaseSpec fixed;
  fixed.batch = fixed.seqlen_q = fixed.seqlen_k = fixed.heads_q = fixed.heads_kv = 1;
  fixed.head_dim = fixed.head_dim_v = 8;
  testing::CaseSpec varlen = fixed;
  varlen.lens_q = {1, 1};
  varlen.lens_k = {1, 1};
  testing::AttnCase cf = testing::make_case(fixed, rng), cv = testing::make_case(varlen, rng);
  const AttnArgs af = cf.args(Backend::CPU), av = cv.args(Backend::CPU);

  testing::KvSpec kv;
  kv.batch = 1;
  kv.heads_q = kv.heads_kv = 1;
  kv.head_dim = kv.head_dim_v = 16;
  kv.seqlen_cache = 16;
  kv.seqlens = {3};
  kv.seqlen_new = 1;
  testing::KvCase ck = testing::make_kv_case(kv, rng);
  const KvCacheArgs ak = ck.args(Backend::CPU);

  Status st;
  const double vf = us_per_call(n, [&] { st = validate_forward(af); });
  const double ff = us_per_call(n, [&] { st = forward(af); });
  const double vv = us_per_call(n, [&] { st = validate_forward(av); });
  const double fv = us_per_call(n, [&] { st = forward(av); });
  const double vk = us_per_call(n, [&] { st = validate_kvcache(ak); });
  const double fk = us_per_call(n, [&] { st = forward_kvcache(ak); });
  if (!st.ok()) return std::printf("failed: %s\n", st.message.c_str()), 1;
  std::printf("host cost per call (us), CPU backend, tiny problems, %d calls x best of 5\n", n);
  std::printf("  validate_forward fixed  %6.2f   forward fixed  %6.2f\n", vf, ff);
  std::printf("  validate_forward varlen %6.2f   forward varlen %6.2f\n", vv, fv);
  std::printf("  validate_kvcache        %6.2f   forward_kvcache %6.2f\n", vk, fk);
#ifdef FASTATTN_WITH_CUDA
  return cuda_section(n);
#else
  return 0;
#endif
}
