// GPU time of the element-bitmask forward against the forward without a mask and native causal (not a
// test): bf16, b 4, s 8192, h 32, d 128. Masks from bench/bitmask_flex.py's files (DIR/<name>.u32:
// uint32 (mask_batch, 1, 8192, 256)), so that FlexAttention's times are of the same bits:
//   docs         8 documents of random lengths per batch entry (block-diagonal: most blocks empty,
//                the document edges partial), bidirectional;
//   docs_causal  the same, as bits ANDed with nothing else (causal in the bits), and the same bits
//                with the causal flag on (the window drops the upper blocks before the bits are read);
//   rand50       every pair kept with probability 1/2: every block partial;
//   causal       causal as bits, beside native causal.
// Each call's time is the median over kRuns calls (CUDA events) and includes the prep kernels. Last, with a
// softcap of 30: causal as bits against native causal (both capped); with `bwd` then the deterministic mode:
// causal as bits and rand50 against the deterministic native causal and dense backward.
// With `bwd` the backward's (BitmaskBwdConfig, its prep included) against the dense and the native causal
// backward, each after one forward of the same mask (its out and lse).
//   fastattn_bitmask_bench DIR [bwd]
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

constexpr int kB = 4, kS = 8192, kH = 32, kD = 128, kWords = kS / 32, kRuns = 20;

// Rows of the file (mask_batch x 8192 rows of 256 words); mask_batch from the file's size.
std::vector<uint32_t> load(const std::string& dir, const std::string& name, int* mask_batch) {
  std::ifstream f(dir + "/" + name + ".u32", std::ios::binary | std::ios::ate);
  if (!f) {
    std::fprintf(stderr, "no %s/%s.u32 (run bench/bitmask_flex.py DIR first)\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
  const size_t bytes = size_t(f.tellg());
  *mask_batch = int(bytes / (size_t(kS) * kWords * 4));
  std::vector<uint32_t> w(bytes / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(w.data()), std::streamsize(bytes));
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const bool bwd = argc > 2 && std::string(argv[2]) == "bwd";
  const size_t elems = size_t(kB) * kS * kH * kD;
  std::vector<uint16_t> host(elems);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  void *q, *k, *v, *out, *lse, *mask_dev;
  for (void** p : {&q, &k, &v, &out}) CHECK_CUDA(cudaMalloc(p, elems * 2));
  for (void* p : {q, k, v}) {
    for (auto& x : host) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = uint16_t((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
    }
    CHECK_CUDA(cudaMemcpy(p, host.data(), elems * 2, cudaMemcpyHostToDevice));
  }
  CHECK_CUDA(cudaMalloc(&lse, size_t(kB) * kH * kS * 4));
  void *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  if (bwd) {
    for (void** p : {&dout, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, elems * 2));
    CHECK_CUDA(cudaMemcpy(dout, host.data(), elems * 2, cudaMemcpyHostToDevice));  // v's values: any will do
  }
  CHECK_CUDA(cudaMalloc(&mask_dev, size_t(kB) * kS * kWords * 4));

  auto args = [&](bool causal, int mask_batch) {  // mask_batch 0: no bits
    AttnArgs a;
    a.q = make_tensor(q, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.k = make_tensor(k, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.v = make_tensor(v, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.out = make_tensor(out, DType::BF16, {kB, kS, kH, kD}, Device::CUDA);
    a.lse = make_tensor(lse, DType::F32, {kB, kH, kS}, Device::CUDA);
    a.causal = causal;
    a.backend = Backend::CUDA;
    a.num_splits = 1;
    if (mask_batch > 0) {
      a.mask.kind = MaskKind::DenseBitmask;
      BitMask& m = a.mask.bits;
      m.data = static_cast<const uint32_t*>(mask_dev);
      const int64_t shape[4] = {mask_batch, 1, kS, kWords};
      const int64_t stride[3] = {int64_t(kS) * kWords, int64_t(kS) * kWords, kWords};
      for (int i = 0; i < 4; ++i) m.shape[i] = shape[i];
      for (int i = 0; i < 3; ++i) m.stride[i] = stride[i];
      m.device = Device::CUDA;
    }
    return a;
  };
  auto call = [&](const AttnArgs& a) {
    if (!bwd) return forward(a, nullptr);
    auto t = [&](void* p) { return make_tensor(p, DType::BF16, {kB, kS, kH, kD}, Device::CUDA); };
    return backward(a, t(dout), t(dq), t(dk), t(dv));
  };
  auto median_ms = [&](const AttnArgs& a) {
    if (bwd) {  // the out and lse the backward reads: this mask's
      const Status st = forward(a, nullptr);
      if (!st.ok()) {
        std::fprintf(stderr, "forward: %s\n", st.message.c_str());
        std::exit(1);
      }
    }
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < kRuns + 3; ++r) {
      CHECK_CUDA(cudaEventRecord(e0));
      const Status st = call(a);
      CHECK_CUDA(cudaEventRecord(e1));
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", bwd ? "backward" : "forward", st.message.c_str());
        std::exit(1);
      }
      CHECK_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };

  std::printf("fastattn bitmask %s, bf16 b%d s%d h%d d%d; median of %d calls (prep included)\n\n",
              bwd ? "backward" : "forward", kB, kS, kH, kD, kRuns);
  std::printf("| mask | causal flag | ms | / dense | / native causal |\n|---|---|---|---|---|\n");
  const float dense = median_ms(args(false, 0)), causal = median_ms(args(true, 0));
  std::printf("| none | no | %.3f | 1 | %.3f |\n", dense, dense / causal);
  std::printf("| none | yes | %.3f | %.3f | 1 |\n", causal, causal / dense);
  const struct {
    const char* name;
    bool causal_flag;
  } runs[] = {{"docs", false}, {"docs_causal", false}, {"docs_causal", true}, {"rand50", false}, {"causal", false}};
  int mb = 0;
  for (const auto& r : runs) {
    const std::vector<uint32_t> w = load(dir, r.name, &mb);
    CHECK_CUDA(cudaMemcpy(mask_dev, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
    const float t = median_ms(args(r.causal_flag, mb));
    std::printf("| %s (bits, mask batch %d) | %s | %.3f | %.3f | %.3f |\n", r.name, mb, r.causal_flag ? "yes" : "no", t,
                t / dense, t / causal);
    std::fflush(stdout);
  }
  // Softcap 30 (the backward's softcap kernels; the forward's run-time branch): the last mask (causal as
  // bits) beside native causal, both capped (its ratio in the last column).
  auto capped = [&](bool causal_flag, int mask_batch) {
    AttnArgs a = args(causal_flag, mask_batch);
    a.softcap = 30.f;
    return a;
  };
  const float cap_causal = median_ms(capped(true, 0)), cap_bits = median_ms(capped(false, mb));
  std::printf("| none, softcap 30 | yes | %.3f | - | 1 |\n", cap_causal);
  std::printf("| causal (bits), softcap 30 | no | %.3f | - | %.3f |\n", cap_bits, cap_bits / cap_causal);
  if (!bwd) return 0;
  // The deterministic backward: causal as bits (still in mask_dev) against the native causal one, rand50
  // against the dense one, all deterministic (ratios against those two).
  auto det = [&](bool causal_flag, int mask_batch) {
    AttnArgs a = args(causal_flag, mask_batch);
    a.deterministic = true;
    return a;
  };
  const float det_dense = median_ms(det(false, 0)), det_causal = median_ms(det(true, 0));
  const float det_bits = median_ms(det(false, mb));
  const std::vector<uint32_t> rand50 = load(dir, "rand50", &mb);
  CHECK_CUDA(cudaMemcpy(mask_dev, rand50.data(), rand50.size() * 4, cudaMemcpyHostToDevice));
  const float det_rand = median_ms(det(false, mb));
  std::printf("| none, deterministic | no | %.3f | 1 | %.3f |\n", det_dense, det_dense / det_causal);
  std::printf("| none, deterministic | yes | %.3f | %.3f | 1 |\n", det_causal, det_causal / det_dense);
  std::printf("| causal (bits), deterministic | no | %.3f | %.3f | %.3f |\n", det_bits, det_bits / det_dense,
              det_bits / det_causal);
  std::printf("| rand50 (bits), deterministic | no | %.3f | %.3f | %.3f |\n", det_rand, det_rand / det_dense,
              det_rand / det_causal);
  return 0;
}
