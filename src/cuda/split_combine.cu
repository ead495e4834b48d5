// The split-KV combine (see split_combine.h): one warp per row. Every lane reads the row's split
// LSEs (few: at most a few hundred) to find the max and the weights, then the lanes share the
// output columns. The merge runs in fp32 and rounds once to the output dtype.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/common/element.cuh"
#include "cuda/split_combine.h"

namespace fastattn::cuda_backend {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T>
__global__ void combine_rows(SplitCombineParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int i = int(r % p.seqlen_q);
    const int h = int(r / p.seqlen_q % p.heads);
    const int b = int(r / (int64_t(p.seqlen_q) * p.heads));
    float m = -INFINITY;
    for (int s = 0; s < p.splits; ++s) m = fmaxf(m, p.lse[s * rows + r]);
    float sum = 0.f;
    if (m != -INFINITY) {
      for (int s = 0; s < p.splits; ++s) {
        const float ls = p.lse[s * rows + r];
        if (ls != -INFINITY) sum += expf(ls - m);
      }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* out = static_cast<T*>(p.out) + b * p.out_stride_b + i * p.out_stride_s + h * p.out_stride_h;
    for (int c = lane; c < p.dv; c += 32) {
      float acc = 0.f;
      for (int s = 0; s < p.splits && m != -INFINITY; ++s) {
        const float ls = p.lse[s * rows + r];
        if (ls != -INFINITY) acc += expf(ls - m) * p.o[(s * rows + r) * p.dv + c];
      }
      out[c] = from_f32<T>(acc * inv);
    }
    if (lane == 0 && p.lse_out) {
      p.lse_out[b * p.lse_stride_b + h * p.lse_stride_h + i * p.lse_stride_s] = sum > 0.f ? m + logf(sum) : -INFINITY;
    }
  }
}

}  // namespace

Status combine_splits(const SplitCombineParams& p, void* stream) {
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  if (rows == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535);
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.out_dtype) {
    case DType::F16: combine_rows<__half><<<unsigned(blocks), kWarpsPerBlock * 32, 0, s>>>(p); break;
    case DType::BF16: combine_rows<__nv_bfloat16><<<unsigned(blocks), kWarpsPerBlock * 32, 0, s>>>(p); break;
    case DType::F32: combine_rows<float><<<unsigned(blocks), kWarpsPerBlock * 32, 0, s>>>(p); break;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {Code::CudaError, std::string("split combine: launch failed: ") + cudaGetErrorString(err)};
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
