// The backward's two small kernels around the main one:
//   preprocess: per (q-block of 64 rows, q head, sequence) D = rowsum(dO * O) in fp32 and the
//     forward's lse in log2 units, both into the padded workspace (+inf lse and D = 0 for rows
//     past the used ones and rows that kept no key, so their P is exactly 0);
//   postprocess: dq = scale * dQ accumulator, from its fragment order into dq's strides.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/bwd_seq.cuh"

namespace fastattn::sm90 {

constexpr int kBwdAuxThreads = 256;

template <class T, int D>
__global__ void __launch_bounds__(kBwdAuxThreads) bwd_preprocess_kernel(const __grid_constant__ cuda_backend::BwdParams p) {
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const cuda_backend::BwdSeq seq(p, b);
  if (m * 64 >= seq.rows_q) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b_off = seq.batch_coord;
  const int64_t ws = int64_t(h) * p.padded_rows + seq.padded_q + m * 64;
  constexpr float kLog2e = 1.4426950408889634f;
  for (int r = warp; r < 64; r += kBwdAuxThreads / 32) {
    const int i = m * 64 + r;
    float acc = 0.f, lse = INFINITY;
    if (i < seq.len_q) {
      const int64_t tok = seq.q_offset + i;
      const T* o = static_cast<const T*>(p.attn.out) + b_off * p.attn.out_stride_b + tok * p.attn.out_stride_s + h * p.attn.out_stride_h;
      const T* g = static_cast<const T*>(p.dout) + b_off * p.dout_stride_b + tok * p.dout_stride_s + h * p.dout_stride_h;
      for (int c = lane; c < D; c += 32) acc += float(o[c]) * float(g[c]);
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      const float l = p.attn.lse[b_off * p.attn.lse_stride_b + int64_t(h) * p.attn.lse_stride_h + tok * p.attn.lse_stride_s];
      lse = l == -INFINITY ? INFINITY : l * kLog2e;  // a row that kept no key: P = exp2(s - inf) = 0
    }
    if (lane == 0) {
      p.dpsum[ws + r] = acc;
      p.lse_log2[ws + r] = lse;
    }
  }
}

// The dQ accumulator of a q-block holds warpgroup w's columns [c_w, c_w + N_w) at float offset
// 64 c_w, element (row, c_w + lc) at 512 (i / 4) + 4 t + i % 4 for the thread t and accumulator
// index i that the wgmma layout gives it (bwd/kernel.cuh adds it so: a float4 per thread, a warp's
// 32 of them contiguous).
__device__ __forceinline__ int dq_accum_index(int row, int col, int cols0) {
  const int c0 = col < cols0 ? 0 : cols0, lc = col - c0;
  const int i = 4 * (lc / 8) + 2 * ((row % 16) / 8) + (lc % 2);
  const int t = 32 * (row / 16) + 4 * (row % 8) + (lc % 8) / 2;
  return 64 * c0 + 512 * (i / 4) + 4 * t + i % 4;
}

template <class T, int D, int Cols0>
__global__ void __launch_bounds__(kBwdAuxThreads) bwd_postprocess_kernel(const __grid_constant__ cuda_backend::BwdParams p) {
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const cuda_backend::BwdSeq seq(p, b);
  if (m * 64 >= seq.rows_q) return;
  const float* acc = p.dq_accum + (int64_t(h) * p.padded_rows + seq.padded_q + m * 64) * D;
  const int rows = min(64, seq.rows_q - m * 64);
  for (int e = threadIdx.x; e < rows * D; e += kBwdAuxThreads) {
    const int r = e / D, c = e % D;
    const int64_t tok = seq.q_offset + m * 64 + r;
    T* dst = static_cast<T*>(p.dq) + int64_t(seq.batch_coord) * p.dq_stride_b + tok * p.dq_stride_s +
             int64_t(h) * p.dq_stride_h + c;
    *dst = T(p.scale * acc[dq_accum_index(r, c, Cols0)]);
  }
}

}  // namespace fastattn::sm90
