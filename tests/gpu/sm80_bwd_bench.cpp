// GPU time of the backward on the sm80 path (forced, as fastattn_sm80_bench forces the forward) and
// on the device's own path, b x s x h x d, bf16, full and causal (not a test):
// fastattn_sm80_bwd_bench b s h d rounds. One JSON line per (path, causal): a measurement is the
// median of 10 CUDA-event timings of backward() after 2 warm-up calls, taken after a 250 ms pause;
// `rounds` rounds over the paths in a rotated order; the line gives the median over rounds and its
// min / max. The device recipe runs it with rounds = 1 between rounds of torch's SDPA flash backward,
// so that both sides share the card's state. TFLOPS from 10 b s^2 h d FLOPs (2.5 x the forward's;
// halved for causal).
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
#include "fastattn/fastattn.h"

namespace {

using namespace fastattn;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: fastattn_sm80_bwd_bench b s h d rounds\n");
    return 2;
  }
  const int b = std::atoi(argv[1]), s = std::atoi(argv[2]), h = std::atoi(argv[3]), d = std::atoi(argv[4]),
            rounds = std::atoi(argv[5]);
  int real = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&real, cudaDevAttrComputeCapabilityMajor, 0));
  const size_t n = size_t(b) * s * h * d;
  std::vector<__nv_bfloat16> host(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (auto& x : host) x = __float2bfloat16(normal(rng));
  void *q, *k, *v, *o, *g, *dq, *dk, *dv, *lse;
  for (void** p : {&q, &k, &v, &o, &g, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, n * 2));
  CHECK_CUDA(cudaMalloc(&lse, size_t(b) * h * s * 4));
  for (void* p : {q, k, v, g}) CHECK_CUDA(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice));
  auto t4 = [&](void* p) { return make_tensor(p, DType::BF16, {b, s, h, d}, Device::CUDA); };
  AttnArgs a;
  a.q = t4(q);
  a.k = t4(k);
  a.v = t4(v);
  a.out = t4(o);
  a.lse = make_tensor(lse, DType::F32, {b, h, s}, Device::CUDA);
  a.num_splits = 1;
  const char* names[] = {"sm80-bwd", "native-bwd"};
  std::vector<int> runs = {0};
  if (real > 8) runs.push_back(1);
  for (bool causal : {false, true}) {
    a.causal = causal;
    std::vector<std::vector<float>> times(2);
    for (int round = 0; round < rounds; ++round)
      for (size_t i = 0; i < runs.size(); ++i) {
        const int run = runs[(i + size_t(round)) % runs.size()];
        cuda_backend::set_forced_arch_major(run == 0 ? 8 : 0);
        // The forward of the same path (its out and lse), then the pause, then the timed backwards.
        if (const Status st = forward(a, nullptr); !st.ok()) {
          std::fprintf(stderr, "forward: %s\n", st.message.c_str());
          return 1;
        }
        CHECK_CUDA(cudaDeviceSynchronize());
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        times[size_t(run)].push_back(gputest::median_call_ms(
            "backward", [&] { return backward(a, t4(g), t4(dq), t4(dk), t4(dv), nullptr); }, 2, 10));
      }
    const double flops = 10.0 * b * double(s) * s * h * d * (causal ? 0.5 : 1.0);
    for (int run : runs) {
      gputest::print_rounds_line(names[run], b, s, h, d, causal, times[size_t(run)], rounds, flops);
    }
    std::fflush(stdout);
  }
  cuda_backend::set_forced_arch_major(0);
  for (void* p : {q, k, v, o, g, dq, dk, dv, lse}) CHECK_CUDA(cudaFree(p));
  return 0;
}
