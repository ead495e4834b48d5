// The split-D forward's stores, from registers: one consumer warpgroup's 64 rows of its 256-column
// slice, either normalised into out (and lse), or, under split-KV, as fp32 partials of its split
// for the combine kernel (split_combine.cu). A thread holds rows row_in_tile and + 8, columns
// 8 j + 2 quad_col (+1) of each 64-column quarter q: o[q][4 j + 2 h (+1)].
#pragma once

#include "cuda/sm90/fwd_splitd/tile.cuh"

namespace fastattn::sm90 {

// Tile row `tr` (0..63) as a stored row: its query position r and q head, and whether it is
// stored (rows past rows_q, and packed rows of heads past the tile's, are dropped). A row past
// seqused gets out 0 (inv 0: out_pair) and lse -inf (the reference's convention).
struct SplitDRow {
  int r, head;
  bool keep;
};
__device__ __forceinline__ SplitDRow splitd_row(const SplitDParams& p, const SplitDTile& t, int tr, float& inv,
                                                float& lse) {
  const int r = t.m0 + (tr & p.row_pos_mask), g = tr >> p.row_head_shift;
  if (r >= t.seq.len_q) {
    inv = 0.f;
    lse = -INFINITY;
  }
  return {r, t.head + g, r < t.seq.rows_q && g < t.heads};
}

template <class T, int kWG>
__device__ __forceinline__ void splitd_store_out(const SplitDParams& p, const SplitDTile& t, int row_in_tile,
                                                 int quad_col, const float (&o)[SplitDConfig::kSliceAtoms][32],
                                                 float (&inv)[2], float (&lse)[2]) {
  using Cfg = SplitDConfig;
  const cuda_backend::AttnParams& a = p.attn;
  const int64_t b_off = t.seq.batch_coord;
  const int col0 = (t.pair * Cfg::kPairAtoms + kWG * Cfg::kSliceAtoms) * kAtomCols;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const SplitDRow w = splitd_row(p, t, row_in_tile + 8 * h, inv[h], lse[h]);
    if (!w.keep) continue;
    T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + int64_t(t.seq.q_offset + w.r) * a.out_stride_s +
             int64_t(w.head) * a.out_stride_h + col0;
#pragma unroll
    for (int q = 0; q < Cfg::kSliceAtoms; ++q) {
      if (col0 + q * kAtomCols >= p.v_atoms * kAtomCols) continue;  // past d_v (TMA's zero fill)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<uint32_t*>(out + q * kAtomCols + 8 * j + 2 * quad_col) =
            cuda_backend::out_pair<T>(o[q][4 * j + 2 * h], o[q][4 * j + 2 * h + 1], inv[h]);
    }
    if (a.lse != nullptr && kWG == 0 && t.pair == 0 && quad_col == 0)
      a.lse[b_off * a.lse_stride_b + int64_t(w.head) * a.lse_stride_h + int64_t(t.seq.q_offset + w.r) * a.lse_stride_s] =
          lse[h];
  }
}

// Split-KV: this split's rows normalised by its own sum (a split that kept no key of a row: lse
// -inf, which the combine weighs 0 without reading its o, as store_partial's), fp32, d_v columns a
// row (the workspace's row width).
template <int kWG>
__device__ __forceinline__ void splitd_store_partial(const SplitDParams& p, const SplitDTile& t, int row_in_tile,
                                                     int quad_col, const float (&o)[SplitDConfig::kSliceAtoms][32],
                                                     float (&inv)[2], float (&lse)[2]) {
  using Cfg = SplitDConfig;
  const int dv = p.v_atoms * kAtomCols;
  const int col0 = (t.pair * Cfg::kPairAtoms + kWG * Cfg::kSliceAtoms) * kAtomCols;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const SplitDRow w = splitd_row(p, t, row_in_tile + 8 * h, inv[h], lse[h]);
    if (!w.keep) continue;
    const int64_t row = t.split * p.part_rows +
                        (int64_t(t.seq.batch_coord) * p.attn.heads_q + w.head) * p.part_rows_per_head +
                        t.seq.q_offset + w.r;
    float* dst = p.o_part + row * dv + col0 + 2 * quad_col;
#pragma unroll
    for (int q = 0; q < Cfg::kSliceAtoms; ++q) {
      if (col0 + q * kAtomCols >= dv) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<float2*>(dst + q * kAtomCols + 8 * j) =
            make_float2(o[q][4 * j + 2 * h] * inv[h], o[q][4 * j + 2 * h + 1] * inv[h]);
    }
    if (kWG == 0 && t.pair == 0 && quad_col == 0) p.lse_part[row] = lse[h];
  }
}

}  // namespace fastattn::sm90
