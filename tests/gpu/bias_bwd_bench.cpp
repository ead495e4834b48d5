// GPU time of the sm90 backward with an additive bias against the same call without one (not a test):
// fastattn_bias_bwd_bench B S H D [causal]. bf16 q / k / v / dO, a (1, H, S, S) bf16 bias; rows: no bias,
// bias without dbias, bias with dbias (fp32, summed over the batch by atomics). out / lse come from the
// forward without the bias (the timing does not depend on their values, only on finite magnitudes).
// One JSON line per row: median / min / max of 20 CUDA-event timings after 3 warm-up calls, and TFLOPS
// with backward FLOPs = 2.5 x forward (4 B H S^2 D, halved when causal).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_check.h"
#include "fastattn/fastattn.h"

namespace {

using fastattn::AttnArgs;
using fastattn::Device;
using fastattn::DType;
using fastattn::make_tensor;
using fastattn::Tensor;

void* device_random(size_t elems) {  // bf16 in [-1, 1): a 1M-element host pattern, copied over the buffer
  const size_t chunk = std::min<size_t>(elems, size_t(1) << 20);
  std::vector<uint16_t> host(chunk);
  uint32_t x = 12345;
  for (auto& h : host) {
    x = x * 1664525u + 1013904223u;
    const float f = float(x >> 8) / float(1 << 24) * 2.f - 1.f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    h = uint16_t(bits >> 16);
  }
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, elems * 2));
  for (size_t at = 0; at < elems; at += chunk)
    CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(p) + at, host.data(), std::min(chunk, elems - at) * 2,
                          cudaMemcpyHostToDevice));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s B S H D [causal]\n", argv[0]);
    return 2;
  }
  const int64_t b = std::atoi(argv[1]), s = std::atoi(argv[2]), h = std::atoi(argv[3]), d = std::atoi(argv[4]);
  const bool causal = argc > 5 && std::atoi(argv[5]) != 0;
  const size_t tok = size_t(b * s * h * d);
  void *q = device_random(tok), *k = device_random(tok), *v = device_random(tok), *dout = device_random(tok);
  void *out = nullptr, *lse = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *dbias = nullptr;
  CHECK_CUDA(cudaMalloc(&out, tok * 2));
  CHECK_CUDA(cudaMalloc(&dq, tok * 2));
  CHECK_CUDA(cudaMalloc(&dk, tok * 2));
  CHECK_CUDA(cudaMalloc(&dv, tok * 2));
  CHECK_CUDA(cudaMalloc(&lse, size_t(b * h * s) * 4));
  void* bias = device_random(size_t(h * s * s));
  CHECK_CUDA(cudaMalloc(&dbias, size_t(h * s * s) * 4));

  AttnArgs a;
  a.q = make_tensor(q, DType::BF16, {b, s, h, d}, Device::CUDA);
  a.k = make_tensor(k, DType::BF16, {b, s, h, d}, Device::CUDA);
  a.v = make_tensor(v, DType::BF16, {b, s, h, d}, Device::CUDA);
  a.out = make_tensor(out, DType::BF16, {b, s, h, d}, Device::CUDA);
  a.lse = make_tensor(lse, DType::F32, {b, h, s}, Device::CUDA);
  a.causal = causal;
  if (fastattn::Status st = fastattn::forward(a); !st.ok()) {
    std::fprintf(stderr, "forward: %s\n", st.message.c_str());
    return 1;
  }
  const Tensor tdo = make_tensor(dout, DType::BF16, {b, s, h, d}, Device::CUDA);
  const Tensor tdq = make_tensor(dq, DType::BF16, {b, s, h, d}, Device::CUDA);
  const Tensor tdk = make_tensor(dk, DType::BF16, {b, s, h, d}, Device::CUDA);
  const Tensor tdv = make_tensor(dv, DType::BF16, {b, s, h, d}, Device::CUDA);
  const double flops = 2.5 * 4.0 * double(b) * h * double(s) * s * d * (causal ? 0.5 : 1.0);

  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const char* rows[3] = {"no_bias", "bias", "bias_dbias"};
  for (int row = 0; row < 3; ++row) {
    AttnArgs r = a;
    if (row > 0) r.bias = make_tensor(bias, DType::BF16, {1, h, s, s}, Device::CUDA);
    if (row > 1) r.dbias = make_tensor(dbias, DType::F32, {1, h, s, s}, Device::CUDA);
    std::vector<float> ms;
    for (int it = 0; it < 23; ++it) {
      CHECK_CUDA(cudaEventRecord(e0));
      const fastattn::Status st = fastattn::backward(r, tdo, tdq, tdk, tdv);
      CHECK_CUDA(cudaEventRecord(e1));
      if (!st.ok()) {
        std::fprintf(stderr, "backward (%s): %s\n", rows[row], st.message.c_str());
        return 1;
      }
      CHECK_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (it >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const float med = ms[ms.size() / 2];
    std::printf("{\"impl\": \"fastattn\", \"row\": \"%s\", \"b\": %lld, \"s\": %lld, \"h\": %lld, \"d\": %lld, "
                "\"causal\": %d, \"ms_median\": %.4f, \"ms_min\": %.4f, \"ms_max\": %.4f, \"tflops\": %.1f}\n",
                rows[row], (long long)b, (long long)s, (long long)h, (long long)d, causal ? 1 : 0, med, ms.front(),
                ms.back(), flops / (med * 1e-3) / 1e12);
  }
  return 0;
}
