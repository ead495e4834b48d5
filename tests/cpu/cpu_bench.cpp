// Times the CPU backend's forward and backward on one problem and prints GFLOPS
// (forward 4*b*h*s_q*s_k*d flops, backward 2.5x that; halved under causal).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "fastattn/fastattn.h"
#include "support/attn_case.h"

using namespace fastattn;

int main(int argc, char** argv) {
  testing::CaseSpec spec;
  spec.batch = argc > 1 ? std::atoi(argv[1]) : 2;
  spec.seqlen_q = spec.seqlen_k = argc > 2 ? std::atoi(argv[2]) : 1024;
  spec.heads_q = spec.heads_kv = argc > 3 ? std::atoi(argv[3]) : 8;
  spec.head_dim = spec.head_dim_v = argc > 4 ? std::atoi(argv[4]) : 64;
  spec.causal = argc > 5 && std::atoi(argv[5]) != 0;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 0;
  testing::Rng rng(testing::test_seed());
  testing::AttnCase c = testing::make_case(spec, rng);
  AttnArgs a = c.args(Backend::CPU);
  a.num_threads = threads;
  double flops = 4.0 * spec.batch * spec.heads_q * double(spec.seqlen_q) * spec.seqlen_k * spec.head_dim;
  if (spec.causal) flops /= 2;
  auto time = [](auto&& fn) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  Status st;
  const double tf = time([&] { st = forward(a); });
  if (!st.ok()) return std::printf("forward failed: %s\n", st.message.c_str()), 1;
  const double tb = time([&] { st = backward(a, c.dout.view(), c.dq.view(), c.dk.view(), c.dv.view()); });
  if (!st.ok()) return std::printf("backward failed: %s\n", st.message.c_str()), 1;
  std::printf("%s\nforward  %.2f ms  %.1f GFLOPS\nbackward %.2f ms  %.1f GFLOPS\n",
              spec.describe().c_str(), tf * 1e3, flops / tf * 1e-9, tb * 1e3, 2.5 * flops / tb * 1e-9);
  return 0;
}
