// The seqlen / causal / local mask of one sequence, as the kernels see it: for query row i the
// kept keys are lo(i) <= j < hi(i) (FlashAttention's bottom-right alignment, offset s_k - s_q).
// It mirrors src/reference/mask_oracle (the one truth); the GPU tests check it against that.
//
// Tiles are classified before any K/V is loaded: the block range skips empty tiles, full tiles
// run unmasked, and only partial tiles build keep-bits (R2P-friendly 32-bit masks, see keep_bits).
#pragma once

#include <climits>

namespace fastattn::cuda_backend {

struct WindowMask {
  int len_k;
  int diag;          // len_k - len_q
  int left, right;   // -1 = unbounded

  __device__ __forceinline__ int lo(int i) const { return left < 0 ? 0 : max(0, i + diag - left); }
  __device__ __forceinline__ int hi(int i) const {
    return right < 0 ? len_k : min(len_k, i + diag + right + 1);
  }

  // KV tiles [begin, end) that rows [m0, m1) can see; empty when end <= begin.
  __device__ __forceinline__ void tile_range(int m0, int m1, int tile_n, int& begin, int& end) const {
    begin = lo(m0) / tile_n;
    end = (hi(m1 - 1) + tile_n - 1) / tile_n;
  }

  // KV tiles [begin, end) that every row of [m0, m1) keeps whole: tile n is full when
  // n * tile_n >= lo(m1 - 1) and (n + 1) * tile_n <= hi(m0). Computed once per m-block, so the
  // loop tests a block with one comparison (the per-block test cost ~25 instructions).
  __device__ __forceinline__ void full_range(int m0, int m1, int tile_n, int& begin, int& end) const {
    begin = (lo(m1 - 1) + tile_n - 1) / tile_n;
    end = max(0, hi(m0)) / tile_n;
  }
};

}  // namespace fastattn::cuda_backend
