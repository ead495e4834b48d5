// GPU time of the block-sparse forward and backward against the calls without a mask (not a test):
// bf16, b 4, s 8192, h 32, d 128, blocks 128 x 128, a mask per (batch, head), causal off and on. Each
// call's time is the median over kRuns runs (CUDA events); the prep kernel is part of the timed call
// (the backward: its default mode; the dense backward takes its own routes: at full attention the
// 80-row tile, causal the recompute band where it serves).
//   fastattn_block_sparse_bench [mask_dir] [--backward-only]
// mask_dir: where bench/block_sparse_flex.py left its masks (mask_<density>.u8: uint8 (4, 32, 64,
// 64), C order), so that FlexAttention's times are of the same masks; without it (or a missing
// file) the bench draws its own. Prints a markdown table: the mask's share of the dense call's
// blocks (causal: of the blocks on and below the diagonal), the time, its ratio to the dense call,
// and the prediction density x dense time (docs/notes/masks-sm90.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_check.h"
#include "fastattn/fastattn.h"

using namespace fastattn;

namespace {

constexpr int kB = 4, kS = 8192, kH = 32, kD = 128, kBlocks = kS / 128, kRuns = 20;

std::vector<uint8_t> load_or_draw(const std::string& dir, const std::string& name, double density, uint32_t seed) {
  std::vector<uint8_t> m(size_t(kB) * kH * kBlocks * kBlocks);
  if (!dir.empty()) {
    std::ifstream f(dir + "/mask_" + name + ".u8", std::ios::binary);
    if (f.read(reinterpret_cast<char*>(m.data()), std::streamsize(m.size()))) return m;
    std::fprintf(stderr, "no %s/mask_%s.u8: drawing the mask here\n", dir.c_str(), name.c_str());
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& x : m) x = density >= 1.0 || u(rng) < density ? 1 : 0;
  return m;
}

// The mask's kept share of the blocks the dense call computes.
double kept_share(const std::vector<uint8_t>& m, bool causal) {
  double kept = 0, all = 0;
  for (int bh = 0; bh < kB * kH; ++bh)
    for (int i = 0; i < kBlocks; ++i)
      for (int j = 0; j < kBlocks; ++j) {
        if (causal && j > i) continue;
        all += 1;
        kept += m[size_t((bh * kBlocks + i) * kBlocks + j)] != 0;
      }
  return kept / all;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "";
  const size_t elems = size_t(kB) * kS * kH * kD;
  std::vector<uint16_t> host(elems);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  const bool backward_only = argc > 2 && std::strcmp(argv[2], "--backward-only") == 0;
  void *q, *k, *v, *out, *lse, *mask_dev, *dout, *dq, *dk, *dv;
  for (void** p : {&q, &k, &v, &out, &dout, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, elems * 2));
  for (void* p : {q, k, v, dout}) {
    for (auto& x : host) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // bf16, round to nearest even
    }
    CHECK_CUDA(cudaMemcpy(p, host.data(), elems * 2, cudaMemcpyHostToDevice));
  }
  CHECK_CUDA(cudaMalloc(&lse, size_t(kB) * kH * kS * 4));
  CHECK_CUDA(cudaMalloc(&mask_dev, size_t(kB) * kH * kBlocks * kBlocks));

  auto args = [&](bool causal, bool masked) {
    AttnArgs a;
    a.q = make_tensor(q, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.k = make_tensor(k, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.v = make_tensor(v, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.out = make_tensor(out, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.lse = make_tensor(lse, DType::F32, {kB, kH, kS}, Device::CUDA);
    a.causal = causal;
    a.backend = Backend::CUDA;
    a.num_splits = 1;
    if (masked) {
      a.mask.kind = MaskKind::BlockSparse;
      BlockMask& m = a.mask.blocks;
      m.data = static_cast<const uint8_t*>(mask_dev);
      const int64_t shape[4] = {kB, kH, kBlocks, kBlocks};
      const int64_t stride[4] = {int64_t(kH) * kBlocks * kBlocks, int64_t(kBlocks) * kBlocks, kBlocks, 1};
      for (int i = 0; i < 4; ++i) {
        m.shape[i] = shape[i];
        m.stride[i] = stride[i];
      }
      m.device = Device::CUDA;
    }
    return a;
  };
  // The median of kRuns timed calls of `call` (after three warm-up calls).
  auto median_of = [&](auto call) {
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < kRuns + 3; ++r) {
      CHECK_CUDA(cudaEventRecord(e0));
      const Status st = call();
      CHECK_CUDA(cudaEventRecord(e1));
      if (!st.ok()) {
        std::fprintf(stderr, "call: %s\n", st.message.c_str());
        std::exit(1);
      }
      CHECK_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 3) ms.push_back(t);  // three warm-up calls
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  auto median_ms = [&](const AttnArgs& a) { return median_of([&] { return forward(a, nullptr); }); };
  // The backward of a: its forward once (out, lse), then the timed backward calls.
  auto backward_ms = [&](const AttnArgs& a) {
    const Status st = forward(a, nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "forward: %s\n", st.message.c_str());
      std::exit(1);
    }
    auto t = [&](void* p) { return make_tensor(p, DType::BF16, {kB, kS, kH, kD}, Device::CUDA); };
    return median_of([&] { return backward(a, t(dout), t(dq), t(dk), t(dv), nullptr); });
  };

  std::printf("bf16 b%d s%d h%d d%d, blocks 128 x 128, mask (b, h, %d, %d); median of %d calls\n\n", kB, kS, kH, kD,
              kBlocks, kBlocks, kRuns);
  std::printf("| pass | causal | mask | kept share | ms | / dense | predicted ms (share x dense) |\n|---|---|---|---|---|---|---|\n");
  const struct {
    const char* name;
    double density;
  } masks[] = {{"1", 1.0}, {"0.5", 0.5}, {"0.25", 0.25}, {"0.1", 0.1}, {"0", 0.0}};
  for (bool bwd : {false, true})
    for (bool causal : {false, true}) {
      if (!bwd && backward_only) continue;
      const char* pass = bwd ? "bwd" : "fwd";
      auto time = [&](const AttnArgs& a) { return bwd ? backward_ms(a) : median_ms(a); };
      const float dense = time(args(causal, false));
      std::printf("| %s | %s | none | 1 | %.3f | 1 | |\n", pass, causal ? "yes" : "no", dense);
      for (const auto& m : masks) {
        const std::vector<uint8_t> bytes = load_or_draw(dir, m.name, m.density, 1234u + uint32_t(m.density * 1000));
        CHECK_CUDA(cudaMemcpy(mask_dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
        const double share = kept_share(bytes, causal);
        const float t = time(args(causal, true));
        std::printf("| %s | %s | %s | %.3f | %.3f | %.3f | %.3f |\n", pass, causal ? "yes" : "no", m.name, share, t,
                    t / dense, share * dense);
        std::fflush(stdout);
      }
    }
  return 0;
}
