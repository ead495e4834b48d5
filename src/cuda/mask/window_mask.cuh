// The seqlen / causal / local mask of one sequence, as the kernels see it: for query row i the
// kept keys are lo(i) <= j < hi(i) (FlashAttention's bottom-right alignment, offset s_k - s_q).
// It mirrors src/reference/mask_oracle (the one truth); the CPU tests check it against that
// (tests/cpu/block_source_test.cpp), the GPU tests the kernels built on it.
//
// Tiles are classified before any K/V is loaded: the block range skips empty tiles, full tiles
// run unmasked, and only partial tiles build keep-bits (R2P-friendly 32-bit masks, see keep_bits).
// The walks over those ranges are mask/block_source.cuh's.
#pragma once

#include <algorithm>
#include <climits>

#include "cuda/common/host_device.h"

namespace fastattn::cuda_backend {

// min / max of ints on either side (the device's are the intrinsics the kernels always used).
FASTATTN_HD int imin(int a, int b) {
#ifdef __CUDA_ARCH__
  return min(a, b);
#else
  return std::min(a, b);
#endif
}
FASTATTN_HD int imax(int a, int b) {
#ifdef __CUDA_ARCH__
  return max(a, b);
#else
  return std::max(a, b);
#endif
}

struct WindowMask {
  int len_k;
  int diag;          // len_k - len_q
  int left, right;   // -1 = unbounded

  FASTATTN_HD int lo(int i) const { return left < 0 ? 0 : imax(0, i + diag - left); }
  FASTATTN_HD int hi(int i) const { return right < 0 ? len_k : imin(len_k, i + diag + right + 1); }

  // KV tiles [begin, end) that rows [m0, m1) can see; empty when end <= begin.
  FASTATTN_HD void tile_range(int m0, int m1, int tile_n, int& begin, int& end) const {
    begin = lo(m0) / tile_n;
    end = (hi(m1 - 1) + tile_n - 1) / tile_n;
  }

  // KV tiles [begin, end) that every row of [m0, m1) keeps whole: tile n is full when
  // n * tile_n >= lo(m1 - 1) and (n + 1) * tile_n <= hi(m0). Computed once per m-block, so the
  // loop tests a block with one comparison (the per-block test cost ~25 instructions).
  FASTATTN_HD void full_range(int m0, int m1, int tile_n, int& begin, int& end) const {
    begin = (lo(m1 - 1) + tile_n - 1) / tile_n;
    end = imax(0, hi(m0)) / tile_n;
  }

  // Column view (the backward walks the q-blocks of a key block: block_source's query_blocks).
  // Rows kept by key j are row_lo(j) <= i < row_hi(j): the rows whose [lo(i), hi(i)) holds j,
  // within [0, len_q); none for j >= len_k. Both ends are non-decreasing in j below len_k, as lo
  // and hi are in i.
  FASTATTN_HD int len_q() const { return len_k - diag; }
  FASTATTN_HD int row_lo(int j) const { return right < 0 ? 0 : imax(0, j - diag - right); }
  FASTATTN_HD int row_hi(int j) const {
    if (j >= len_k) return 0;
    return left < 0 ? len_q() : imin(len_q(), j - diag + left + 1);
  }

};

}  // namespace fastattn::cuda_backend
