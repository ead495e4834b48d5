// GPU time of the forward on the sm80 path (forced: FASTATTN_FORCE_ARCH semantics through
// set_forced_arch_major) and on the device's own path, b x s x h x d, bf16, causal or not (not a
// test): fastattn_sm80_bench [b s h d]. One JSON line per (path, d, causal): a measurement is the
// median of 20 CUDA-event timings after 3 warm-up calls, taken after a 250 ms pause; kRounds rounds
// over the paths in a rotated order; the line gives the median over rounds and its min / max.
// TFLOPS from 4 b s^2 h d FLOPs (halved for causal).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "bench_check.h"
#include "bench_timing.h"
#include "cuda/device_info.h"
#include "cuda/sm80/fwd/api.h"
#include "fastattn/fastattn.h"

namespace {

using namespace fastattn;

constexpr int kRounds = 5;

}  // namespace

int main(int argc, char** argv) {
  const int b = argc > 4 ? std::atoi(argv[1]) : 4, s = argc > 4 ? std::atoi(argv[2]) : 4096,
            h = argc > 4 ? std::atoi(argv[3]) : 32;
  std::vector<int> dims = {64, 128};
  if (argc > 4) dims = {std::atoi(argv[4])};
  int real = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&real, cudaDevAttrComputeCapabilityMajor, 0));
  for (int d : dims) {
    const size_t n = size_t(b) * s * h * d;
    std::vector<__nv_bfloat16> host(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (auto& x : host) x = __float2bfloat16(normal(rng));
    void *q, *k, *v, *o;
    for (void** p : {&q, &k, &v, &o}) CHECK_CUDA(cudaMalloc(p, n * 2));
    for (void* p : {q, k, v}) CHECK_CUDA(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice));
    const int64_t shape[4] = {b, s, h, d};
    AttnArgs a;
    a.q = make_tensor(q, DType::BF16, {shape[0], shape[1], shape[2], shape[3]}, Device::CUDA);
    a.k = make_tensor(k, DType::BF16, {shape[0], shape[1], shape[2], shape[3]}, Device::CUDA);
    a.v = make_tensor(v, DType::BF16, {shape[0], shape[1], shape[2], shape[3]}, Device::CUDA);
    a.out = make_tensor(o, DType::BF16, {shape[0], shape[1], shape[2], shape[3]}, Device::CUDA);
    a.num_splits = 1;
    for (bool causal : {false, true}) {
      a.causal = causal;
      // sm80 as the device would pick it, then (d 128) both K/V orders forced, then the device's own path.
      const sm80::KvOrder orders[] = {sm80::KvOrder::Auto, sm80::KvOrder::Fa2, sm80::KvOrder::Ring};
      const char* names[] = {"sm80", "sm80-fa2-order", "sm80-ring", "native"};
      std::vector<int> runs;
      for (int run = 0; run < 4; ++run) {
        if (run > 0 && run < 3 && d != 128) continue;  // d 64 has one order
        if (run == 3 && real == 8) continue;           // the device's own path is the sm80 one
        runs.push_back(run);
      }
      // Rounds over the paths in a rotated order, each measurement after an idle pause: on a
      // power-capped card a row timed right after a hot one runs at a lower clock (session 37 timed
      // one kernel 20 % apart in back-to-back rows). Per path: the median over rounds, and the spread.
      std::vector<std::vector<float>> times(4);
      for (int round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < runs.size(); ++i) {
          const int run = runs[(i + size_t(round)) % runs.size()];
          cuda_backend::set_forced_arch_major(run < 3 ? 8 : 0);
          sm80::set_kv_order(run < 3 ? orders[run] : sm80::KvOrder::Auto);
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
          times[size_t(run)].push_back(gputest::median_call_ms("forward", [&] { return forward(a, nullptr); }, 3, 20));
        }
      }
      const double flops = 4.0 * b * double(s) * s * h * d * (causal ? 0.5 : 1.0);
      for (int run : runs) {
        gputest::print_rounds_line(names[run], b, s, h, d, causal, times[size_t(run)], kRounds, flops);
      }
      std::fflush(stdout);
      sm80::set_kv_order(sm80::KvOrder::Auto);
    }
    cuda_backend::set_forced_arch_major(0);
    for (void* p : {q, k, v, o}) CHECK_CUDA(cudaFree(p));
  }
  return 0;
}
