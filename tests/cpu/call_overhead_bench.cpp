// Host cost of one API call, without the kernel's work: validation + problem resolution
// (validate_forward), and the whole forward() on a problem so small that the CPU backend's work is
// a few dot products (b 1, s 1, h 1, d 8). Fixed-length and varlen, and forward_kvcache's decode
// step. Prints microseconds per call (best of 5 runs of N calls): fastattn_call_overhead_bench [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

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
  return 0;
}
