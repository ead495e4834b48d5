// The arithmetic of a split-KV merge, shared by the combine kernel (split_combine.cu) and the
// merge inside a thread-block cluster (sm90/fwd/cluster_merge.cuh), so that both give the same
// bits: a warp holds one split's LSE per lane, reduces the max and the sum by the same xor
// shuffles, and adds the weighted partials split after split with the same fmaf chain.
#pragma once

#include <cuda_runtime.h>

namespace fastattn::cuda_backend {

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// acc += w * x for the splits with weight; the others' x is never looked at (it may be NaN).
__device__ __forceinline__ void add_weighted(float4& acc, float w, const float4& x) {
  const bool use = w > 0.f;
  acc.x = use ? fmaf(w, x.x, acc.x) : acc.x;
  acc.y = use ? fmaf(w, x.y, acc.y) : acc.y;
  acc.z = use ? fmaf(w, x.z, acc.z) : acc.z;
  acc.w = use ? fmaf(w, x.w, acc.w) : acc.w;
}

}  // namespace fastattn::cuda_backend
