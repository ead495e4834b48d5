// The split-KV combine (see split_combine.h): one warp per row, each row merged by combine_row
// (split_combine_row.cuh: its lanes share the row's splits for the LSE max and sum, then each lane
// owns 4 output columns, one float4 of every split's partial row; a warp reads 512 contiguous
// bytes per split).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/split_combine.h"
#include "cuda/split_combine_row.cuh"

namespace fastattn::cuda_backend {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T>
__global__ void combine_rows(SplitCombineParams p) {
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int i = int(r % p.seqlen_q);
    const int h = int(r / p.seqlen_q % p.heads);
    const int b = int(r / (int64_t(p.seqlen_q) * p.heads));
    if (p.cu_seqlens_q && (i < p.cu_seqlens_q[0] || i >= p.cu_seqlens_q[p.varlen_batch])) continue;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // The partials of the kernel before are complete and visible (a no-op without early_launch, and
    // after the first row). The row's index arithmetic above (64-bit divisions) runs under the wait.
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    T* out = static_cast<T*>(p.out) + b * p.out_stride_b + i * p.out_stride_s + h * p.out_stride_h;
    float* lse_out = p.lse_out ? p.lse_out + b * p.lse_stride_b + h * p.lse_stride_h + i * p.lse_stride_s : nullptr;
    combine_row<T>(p.o + r * p.dv, p.lse + r, rows, p.splits, p.dv, out, lse_out);
  }
}

}  // namespace

Status combine_splits(const SplitCombineParams& p, void* stream) {
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  if (rows == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kWarpsPerBlock * 32);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute early[1];
  early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = early;
  cfg.numAttrs = p.early_launch ? 1 : 0;
  cudaError_t err = cudaSuccess;
  switch (p.out_dtype) {
    case DType::F16: err = cudaLaunchKernelEx(&cfg, combine_rows<__half>, p); break;
    case DType::BF16: err = cudaLaunchKernelEx(&cfg, combine_rows<__nv_bfloat16>, p); break;
    case DType::F32: err = cudaLaunchKernelEx(&cfg, combine_rows<float>, p); break;
  }
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return {Code::CudaError, std::string("split combine: launch failed: ") + cudaGetErrorString(err)};
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
