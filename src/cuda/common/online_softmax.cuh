// Online softmax over the rows of a 64xN warpgroup accumulator (each thread: 2 rows, g and g+8,
// of N/4 columns each; the 4 threads of a quad share a row). exp2 with the scale folded into one
// FFMA; the row sum stays per-thread until the end (one quad reduction in the epilogue).
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x and log2(x) in one MUFU op each (about 1 ulp; x is a row sum >= 1 here): the IEEE division's
// and logf's slow paths need registers that the d = 256 epilogue does not have (they spilled).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <int N>
struct OnlineSoftmax {
  float row_max[2] = {-INFINITY, -INFINITY};  // raw (unscaled) scores
  float row_sum[2] = {0.f, 0.f};              // this thread's share

  // Replaces scores s by p = exp2(scale_log2 * (s - max)) with the running max updated, and
  // returns in alpha the factor by which earlier sums and outputs must be rescaled.
  __device__ __forceinline__ void step(float (&s)[N / 2], float scale_log2, float (&alpha)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = row_max[h];
#pragma unroll
      for (int j = 0; j < N / 8; ++j) m = fmaxf(m, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      m = quad_max(m);
      // A row that has kept nothing yet has m = -inf: use 0 so exp2 gives 0, not NaN.
      const float m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
      alpha[h] = fast_exp2(row_max[h] * scale_log2 - m_scaled);
      row_max[h] = m;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < N / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * j + 2 * h + e];
          x = fast_exp2(fmaf(x, scale_log2, -m_scaled));
          sum += x;
        }
      }
      row_sum[h] = row_sum[h] * alpha[h] + sum;
    }
  }

  // Final per-row normaliser (0 for rows that kept no key) and natural-log LSE (-inf for those).
  __device__ __forceinline__ void finish(float scale_log2, float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(row_sum[h]);
      const bool any = sum > 0.f;
      inv[h] = any ? fast_rcp(sum) : 0.f;
      lse[h] = any ? (row_max[h] * scale_log2 + fast_log2(sum)) * 0.69314718055994531f : -INFINITY;
    }
  }
};

// Multiplies row half h of a 64xD accumulator (laid out acc[4*j + 2*h + e]) by f[h].
template <int D>
__device__ __forceinline__ void scale_rows(float (&acc)[D / 2], const float (&f)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[4 * j + i] *= f[i / 2];
  }
}

}  // namespace fastattn::cuda_backend
