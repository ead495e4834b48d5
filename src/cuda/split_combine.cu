// The split-KV combine (see split_combine.h): one warp per row. The lanes share the row's splits
// for the LSE max and sum (shuffle reductions), then each lane owns 4 output columns (one float4
// of every split's partial row: a warp reads 512 contiguous bytes per split). A decode call has
// few rows (b1 h32: 32) and up to ~100 splits: its time is the latency of its dependent loads, so
// the walk over the splits has none: each lane holds one split's weight of a chunk of 32 (shuffled
// to the others), and a group of kGroup partial rows is loaded unconditionally (clamped to the
// last split) before any is used; a split with no weight (lse -inf: its partial row may be
// anything, NaN included) is dropped by a select, never multiplied by 0 (a branch per split would
// put two round trips per split in a row: lse load, test, partial load, FMA). The merge runs in
// fp32 and rounds once to the output dtype.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/common/element.cuh"
#include "cuda/common/grid_dependency.cuh"
#include "cuda/early_launch.h"
#include "cuda/split_combine.h"
#include "cuda/split_merge_math.cuh"

namespace fastattn::cuda_backend {
namespace {

constexpr int kWarpsPerBlock = 4;

// Partial rows loaded together: one L2 round trip covers a decode call's usual 8-16 splits.
constexpr int kGroup = 16;

// Weight of split `s` of the row whose partial LSEs start at `lse` (split s at lse[s * rows]): 0
// past the splits and for a split that kept no key.
__device__ __forceinline__ float split_weight(const float* lse, int64_t rows, int splits, int s, float m) {
  if (s >= splits) return 0.f;
  const float ls = lse[s * rows];
  return merge_weight(ls, m);
}

template <typename T>
__global__ void combine_rows(SplitCombineParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int i = int(r % p.seqlen_q);
    const int h = int(r / p.seqlen_q % p.heads);
    const int b = int(r / (int64_t(p.seqlen_q) * p.heads));
    if (p.cu_seqlens_q && (i < p.cu_seqlens_q[0] || i >= p.cu_seqlens_q[p.varlen_batch])) continue;
    // The partials of the kernel before are complete and visible (a no-op without early_launch, and
    // after the first row). The row's index arithmetic above (64-bit divisions) runs under the wait.
    grid_dependency_wait();
    const float* lse = p.lse + r;  // split s at lse[s * rows]
    // The first 32 splits' LSEs stay in registers (one per lane) for the max, the sum and the weights.
    const float ls0 = lane < p.splits ? lse[lane * rows] : -INFINITY;
    float m = ls0;
    bool nan = ls0 != ls0;
    for (int s = lane + 32; s < p.splits; s += 32) {
      const float ls = lse[s * rows];
      m = fmaxf(m, ls);
      nan = nan || ls != ls;
    }
    m = warp_max(m);
    nan = warp_any_nan(nan);
    const float w0 = merge_weight(ls0, m);
    float sum = w0;
    if (m != -INFINITY)
      for (int s = lane + 32; s < p.splits; s += 32) sum += split_weight(lse, rows, p.splits, s, m);
    sum = warp_sum(sum);
    const float inv = merged_inv(sum, nan);
    T* out = static_cast<T*>(p.out) + b * p.out_stride_b + i * p.out_stride_s + h * p.out_stride_h;
    const float* o = p.o + r * p.dv;  // split s at o[s * rows * dv]
    const int64_t split_stride = rows * p.dv;
    if (p.dv % 4 == 0) {
      // Every lane walks every column step (the weights' shuffles need the whole warp); a lane past
      // d_v loads a valid column and stores nothing.
      for (int c0 = 0; c0 < p.dv; c0 += 128) {
        const int c = min(c0 + 4 * lane, p.dv - 4);
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int base = 0; m != -INFINITY && base < p.splits; base += 32) {
          // this chunk's split `lane`
          const float w_lane = base == 0 ? w0 : split_weight(lse, rows, p.splits, base + lane, m);
          const int last = min(32, p.splits - base) - 1;
          for (int k0 = 0; k0 <= last; k0 += kGroup) {
            float4 x[kGroup];
#pragma unroll
            for (int k = 0; k < kGroup; ++k)
              x[k] = *reinterpret_cast<const float4*>(o + (base + min(k0 + k, last)) * split_stride + c);
#pragma unroll
            for (int k = 0; k < kGroup; ++k)  // lanes past the chunk's last split hold weight 0
              add_weighted(acc, __shfl_sync(0xffffffffu, w_lane, (k0 + k) % 32), x[k]);
          }
        }
        if (c0 + 4 * lane < p.dv) store_merged4(out, c, acc, inv);
      }
    } else {
      for (int c = lane; c < p.dv; c += 32) {
        float acc = 0.f;
        for (int s = 0; m != -INFINITY && s < p.splits; ++s) {
          const float w = split_weight(lse, rows, p.splits, s, m);
          const float x = o[s * split_stride + c];
          acc = w > 0.f ? fmaf(w, x, acc) : acc;
        }
        out[c] = from_f32<T>(acc * inv);
      }
    }
    if (lane == 0 && p.lse_out) {
      p.lse_out[b * p.lse_stride_b + h * p.lse_stride_h + i * p.lse_stride_s] = merged_lse(m, sum, nan);
    }
  }
}

}  // namespace

Status combine_splits(const SplitCombineParams& p, void* stream) {
  const int64_t rows = int64_t(p.batch) * p.heads * p.seqlen_q;
  if (rows == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535);
  const dim3 grid{unsigned(blocks)}, block{unsigned(kWarpsPerBlock * 32)};
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaSuccess;
  switch (p.out_dtype) {
    case DType::F16: err = launch_maybe_early(p.early_launch, combine_rows<__half>, grid, block, 0, s, p); break;
    case DType::BF16: err = launch_maybe_early(p.early_launch, combine_rows<__nv_bfloat16>, grid, block, 0, s, p); break;
    case DType::F32: err = launch_maybe_early(p.early_launch, combine_rows<float>, grid, block, 0, s, p); break;
  }
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return {Code::CudaError, std::string("split combine: launch failed: ") + cudaGetErrorString(err)};
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
