// One row of the split-KV combine (split_combine.h's math), merged by one warp: the combine kernel
// (split_combine.cu) and the split kernel's own last warps (sm90/fwd/combine_in_kernel.cuh) both run
// this code, so the two paths give bitwise equal out and lse.
//
// A decode call has few rows (b1 h32: 32) and up to ~100 splits: a row's time is the latency of its
// dependent loads, so the walk over the splits has none: each lane holds one split's weight of a
// chunk of 32 (shuffled to the others), and a group of kGroup partial rows is loaded
// unconditionally (clamped to the last split) before any is used; a split with no weight (lse
// -inf: its partial row may be anything, NaN included) is dropped by a select, never multiplied by
// 0 (a branch per split would put two round trips per split in a row: lse load, test, partial
// load, FMA). The first group's partial rows are loaded beside the LSEs, before the max and sum
// that the weights need: a decode row (<= 16 splits, d_v <= 128) then costs one round trip, not
// two. The merge runs in fp32 and rounds once to the output dtype. The partials are read through
// L2 (ld.cg): in the split kernel, other CTAs wrote them during this grid.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// Partial rows loaded together: one L2 round trip covers a decode call's usual 8-16 splits.
constexpr int kCombineGroup = 16;

// Weight of split `s` of the row whose partial LSEs start at `lse` (split s at lse[s * rows]): 0
// past the splits and for a split that kept no key.
__device__ __forceinline__ float split_weight(const float* lse, int64_t rows, int splits, int s, float m) {
  if (s >= splits) return 0.f;
  const float ls = __ldcg(lse + s * rows);
  return ls == -INFINITY ? 0.f : expf(ls - m);
}

// Partial rows base + k0 + [0, kCombineGroup) at column c (clamped to split `last` of the chunk).
__device__ __forceinline__ void load_group(float4 (&x)[kCombineGroup], const float* o, int64_t split_stride, int base,
                                           int k0, int last, int c) {
#pragma unroll
  for (int k = 0; k < kCombineGroup; ++k)
    x[k] = __ldcg(reinterpret_cast<const float4*>(o + (base + min(k0 + k, last)) * split_stride + c));
}

// acc += w * x for the splits with weight; the others' x is never looked at (it may be NaN).
__device__ __forceinline__ void add_weighted(float4& acc, float w, const float4& x) {
  const bool use = w > 0.f;
  acc.x = use ? fmaf(w, x.x, acc.x) : acc.x;
  acc.y = use ? fmaf(w, x.y, acc.y) : acc.y;
  acc.z = use ? fmaf(w, x.z, acc.z) : acc.z;
  acc.w = use ? fmaf(w, x.w, acc.w) : acc.w;
}

// Merges one row: its split s partial output at o[s * rows * dv] (dv floats), its LSE at
// lse[s * rows]; writes dv elements at out and, when lse_out is not null, the merged LSE. Every
// lane of the warp calls it with the same arguments.
template <typename T>
__device__ __forceinline__ void combine_row(const float* o, const float* lse, int64_t rows, int splits, int dv,
                                            T* out, float* lse_out) {
  const int lane = threadIdx.x % 32;
  const int64_t split_stride = rows * dv;
  // The first group of the first column step, loaded before its weights are known (see above).
  float4 x[kCombineGroup];
  if (dv % 4 == 0) load_group(x, o, split_stride, 0, 0, min(32, splits) - 1, min(4 * lane, dv - 4));
  // The first 32 splits' LSEs stay in registers (one per lane) for the max, the sum and the weights.
  const float ls0 = lane < splits ? __ldcg(lse + lane * rows) : -INFINITY;
  float m = ls0;
  for (int s = lane + 32; s < splits; s += 32) m = fmaxf(m, __ldcg(lse + s * rows));
  m = warp_max(m);
  const float w0 = ls0 == -INFINITY ? 0.f : expf(ls0 - m);
  float sum = w0;
  if (m != -INFINITY)
    for (int s = lane + 32; s < splits; s += 32) sum += split_weight(lse, rows, splits, s, m);
  sum = warp_sum(sum);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  if (dv % 4 == 0) {
    // Every lane walks every column step (the weights' shuffles need the whole warp); a lane past
    // d_v loads a valid column and stores nothing.
    for (int c0 = 0; c0 < dv; c0 += 128) {
      const int c = min(c0 + 4 * lane, dv - 4);
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int base = 0; m != -INFINITY && base < splits; base += 32) {
        // this chunk's split `lane`
        const float w_lane = base == 0 ? w0 : split_weight(lse, rows, splits, base + lane, m);
        const int last = min(32, splits - base) - 1;
        for (int k0 = 0; k0 <= last; k0 += kCombineGroup) {
          if (c0 != 0 || base != 0 || k0 != 0) load_group(x, o, split_stride, base, k0, last, c);
#pragma unroll
          for (int k = 0; k < kCombineGroup; ++k)  // lanes past the chunk's last split hold weight 0
            add_weighted(acc, __shfl_sync(0xffffffffu, w_lane, (k0 + k) % 32), x[k]);
        }
      }
      if (c0 + 4 * lane < dv) {
        out[c] = from_f32<T>(acc.x * inv);
        out[c + 1] = from_f32<T>(acc.y * inv);
        out[c + 2] = from_f32<T>(acc.z * inv);
        out[c + 3] = from_f32<T>(acc.w * inv);
      }
    }
  } else {
    for (int c = lane; c < dv; c += 32) {
      float acc = 0.f;
      for (int s = 0; m != -INFINITY && s < splits; ++s) {
        const float w = split_weight(lse, rows, splits, s, m);
        const float xs = __ldcg(o + s * split_stride + c);
        acc = w > 0.f ? fmaf(w, xs, acc) : acc;
      }
      out[c] = from_f32<T>(acc * inv);
    }
  }
  if (lane == 0 && lse_out != nullptr) *lse_out = sum > 0.f ? m + logf(sum) : -INFINITY;
}

}  // namespace fastattn::cuda_backend
