// The arithmetic of a split-KV merge, shared by the combine kernel (split_combine.cu) and the
// merge inside a thread-block cluster (sm90/fwd/cluster_merge.cuh), so that both give the same
// bits: a warp holds one split's LSE per lane, reduces the max and the sum by the same xor
// shuffles, weighs the splits, adds the weighted partials split after split with the same fmaf chain,
// and normalises and stores the row the same way.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/element.cuh"

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

// A split's weight against the row's max LSE m: 0 for a split that kept no key.
__device__ __forceinline__ float merge_weight(float split_lse, float m) {
  return split_lse == -INFINITY ? 0.f : expf(split_lse - m);
}
// Whether any lane's split LSE is NaN (a NaN among that split's kept scores: OnlineSoftmax::finish).
__device__ __forceinline__ bool warp_any_nan(bool nan) { return __any_sync(0xffffffffu, nan); }
// The merged row's normaliser and LSE from the max and the weights' sum (a row no split saw: 0, -inf); a
// row with a NaN split gets NaN for both, so that out and lse are NaN as the unsplit call's (the max and
// the weights, which drop NaN, would otherwise merge the other splits alone).
__device__ __forceinline__ float merged_inv(float sum, bool nan) {
  return nan ? NAN : sum > 0.f ? 1.f / sum : 0.f;
}
__device__ __forceinline__ float merged_lse(float m, float sum, bool nan) {
  return nan ? NAN : sum > 0.f ? m + logf(sum) : -INFINITY;
}

// acc += w * x for the splits with weight; the others' x is never looked at (it may be NaN).
__device__ __forceinline__ void add_weighted(float4& acc, float w, const float4& x) {
  const bool use = w > 0.f;
  acc.x = use ? fmaf(w, x.x, acc.x) : acc.x;
  acc.y = use ? fmaf(w, x.y, acc.y) : acc.y;
  acc.z = use ? fmaf(w, x.z, acc.z) : acc.z;
  acc.w = use ? fmaf(w, x.w, acc.w) : acc.w;
}

// Four merged columns, normalised, into out[c, c + 4).
template <typename T>
__device__ __forceinline__ void store_merged4(T* out, int c, const float4& acc, float inv) {
  out[c] = from_f32<T>(acc.x * inv);
  out[c + 1] = from_f32<T>(acc.y * inv);
  out[c + 2] = from_f32<T>(acc.z * inv);
  out[c + 3] = from_f32<T>(acc.w * inv);
}

}  // namespace fastattn::cuda_backend
