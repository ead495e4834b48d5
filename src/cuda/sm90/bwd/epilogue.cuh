// Epilogue of the Hopper backward: dK (times the softmax scale) and dV of a thread's two keys, from
// the accumulator layout by 4-byte stores; keys past len_k hold 0, keys past the sequence are skipped.
#pragma once

#include "cuda/common/math.cuh"  // pack2
#include "cuda/sm90/bwd/tile.cuh"

namespace fastattn::sm90 {

// The accumulators hold N columns from col0 (all of d, or at d > 128 a warpgroup's share) in their
// first N / 2 registers.
template <class T, int N, int R>
__device__ __forceinline__ void store_dk_dv(const BwdParams& p, const BwdTile& t, int key_row, int quad_col, int col0,
                                            const float (&dk)[R], const float (&dv)[R]) {
  static_assert(N / 2 <= R);
  const int64_t b_off = t.seq.batch_coord;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int j = key_row + 8 * hh;
    if (j >= t.seq.rows_k) continue;
    const int64_t tok = t.seq.k_offset + j;
    T* gk = static_cast<T*>(p.dk) + b_off * p.dk_stride_b + tok * p.dk_stride_s + int64_t(t.kv_head) * p.dk_stride_h;
    T* gv = static_cast<T*>(p.dv) + b_off * p.dv_stride_b + tok * p.dv_stride_s + int64_t(t.kv_head) * p.dv_stride_h;
#pragma unroll
    for (int c = 0; c < N / 8; ++c) {
      const int col = col0 + 8 * c + 2 * quad_col;
      *reinterpret_cast<uint32_t*>(gk + col) =
          cuda_backend::pack2<T>(dk[4 * c + 2 * hh] * p.scale, dk[4 * c + 2 * hh + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(gv + col) = cuda_backend::pack2<T>(dv[4 * c + 2 * hh], dv[4 * c + 2 * hh + 1]);
    }
  }
}

}  // namespace fastattn::sm90
