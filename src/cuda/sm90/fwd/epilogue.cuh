// The Hopper forward's register-store epilogue: a warpgroup's normalised O rows and LSE straight
// from registers to global memory (the TMA-store path, which stages O in smem, is the mainloop's
// stage_and_store: it runs inside an iteration).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/math.cuh"
#include "cuda/common/quad_transpose.cuh"
#include "cuda/sm90/fwd/cluster_partials.cuh"
#include "cuda/sm90/fwd/tile.cuh"

namespace fastattn::sm90 {

// Tile row t of tile e: its query position r and its head's offset g in the tile (GQA packing:
// q head e.head + (t >> row_head_shift) at position e.m0 + (t & row_pos_mask); unpacked: e.head,
// e.m0 + t), and whether it is stored (rows past rows_q, r < 0 from first_block_pad, and packed rows
// past the tile's `heads` are dropped). A row past seqused gets o = 0 (inv 0: out_pair) and lse = -inf
// (the reference's convention for a row that keeps no key).
struct StoredRow {
  int r, g;
  bool keep;
};
template <class Blocks>
__device__ __forceinline__ StoredRow stored_row(const FwdParams& p, const FwdTileOf<Blocks>& e, int t, int heads, float& inv,
                                                float& lse) {
  const int r = e.m0 + (t & p.sched.row_pos_mask), g = t >> p.sched.row_head_shift;
  if (r >= e.seq.len_q) {
    inv = 0.f;
    lse = -INFINITY;
  }
  return {r, g, unsigned(r) < unsigned(e.seq.rows_q) && g < heads};
}

// Split-KV (Cfg::kSplit): tile e's rows as fp32 partials of split e.split (FwdSplit's layout), O
// normalised by this split's own sum; rows that kept no key of the split get lse = -inf, which the
// combine weighs 0 without reading their o (o x 0: NaN past seqused where Q holds NaN, no select
// needed). The rows kept are store_rows's (stored_row). Cluster-merge configs:
// pushed to the row's merging CTA instead (cluster_partials.cuh), the same values; not in the block
// stream's stores (kInStream), which such a kernel never runs: a cluster launch gives each CTA one
// tile, stored after the stream.
template <class Cfg, bool kInStream>
__device__ __forceinline__ void store_partial(FwdSmem<Cfg>& sm, const FwdParams& p, const FwdTileFor<Cfg>& e, int row_in_tile,
                                              int quad_col, const float (&o)[Cfg::kHeadDimV / 2], float (&inv)[2],
                                              float (&lse)[2]) {
  constexpr int D = Cfg::kHeadDimV;  // out's columns
  const FwdSplit& sp = p.split;
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t = row_in_tile + 8 * h;
    const StoredRow w = stored_row(p, e, t, heads, inv[h], lse[h]);
    if (!w.keep) continue;
    if constexpr (Cfg::kClusterMerge && !kInStream) {
      push_partial_row<Cfg>(sm, t, sp.splits, e.split, quad_col, o, h, inv[h], lse[h]);
      continue;
    }
    const int64_t row = e.split * sp.rows +
                        (int64_t(e.seq.batch_coord) * p.attn.heads_q + e.head + w.g) * sp.rows_per_head +
                        e.seq.q_offset + w.r;
    float* dst = sp.o_part + row * D + 2 * quad_col;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j + 2 * h] * inv[h], o[4 * j + 2 * h + 1] * inv[h]);
    if (quad_col == 0) sp.lse_part[row] = lse[h];
  }
}

// One warpgroup's 64 rows of tile `e`: O normalised by inv and LSE, by plain stores from registers,
// the rows that stored_row keeps. With one Q buffer (d256, the long-row d128 configs) a quad
// transposes its column pairs so that each lane holds 8 consecutive columns: one 16-byte store
// where out's rows are 16-byte aligned (p.store.out_vec16; d256: 16 stores per thread instead of 64, and
// a warp writes 64 contiguous bytes per row instead of 16), else four 4-byte ones (out needs only
// 4-byte alignment and even strides). Not in the block stream (two Q buffers), where the store
// runs inside an iteration next to the next tile's softmax: there the shuffles' temporaries made
// ptxas spill (d64 on three warpgroups, 160 registers), and where they fit (two warpgroups) they
// cost more than they saved (d64 s1k causal 0.944); plain pairs there.
template <class T, class Cfg, bool kInStream = false>
__device__ __forceinline__ void store_rows(FwdSmem<Cfg>& sm, const FwdParams& p, const FwdTileFor<Cfg>& e, int row_in_tile,
                                           int quad_col, const float (&o)[Cfg::kHeadDimV / 2], float (&inv)[2],
                                           float (&lse)[2]) {
  if constexpr (Cfg::kSplit) {
    store_partial<Cfg, kInStream>(sm, p, e, row_in_tile, quad_col, o, inv, lse);
    return;
  }
  constexpr int D = Cfg::kHeadDimV;  // out's columns
  static_assert(D % 32 == 0, "16-byte stores take 4 column groups of 8 at a time");
  const int64_t b_off = e.seq.batch_coord;  // 0 for varlen
  // The tile's q heads: pack_heads (1 unpacked), fewer in a KV head's last group.
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const StoredRow w = stored_row(p, e, row_in_tile + 8 * h, heads, inv[h], lse[h]);
    const bool keep = w.keep;
    const int r = w.r;
    const int64_t head = e.head + w.g;
    const cuda_backend::AttnParams& a = p.attn;
    T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + (e.seq.q_offset + r) * a.out_stride_s +
             head * a.out_stride_h;
    if constexpr (Cfg::kQBuffers == 1) {
#pragma unroll
      for (int j = 0; j < D / 8; j += 4) {  // the quad's shuffles need every lane: only the store is predicated
        uint32_t m[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          m[k] = cuda_backend::out_pair<T>(o[4 * (j + k) + 2 * h], o[4 * (j + k) + 2 * h + 1], inv[h]);
        const uint4 v = cuda_backend::quad_transpose(m, quad_col);
        T* dst = out + 8 * (j + quad_col);
        if (keep && p.store.out_vec16) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else if (keep) {
          reinterpret_cast<uint32_t*>(dst)[0] = v.x;
          reinterpret_cast<uint32_t*>(dst)[1] = v.y;
          reinterpret_cast<uint32_t*>(dst)[2] = v.z;
          reinterpret_cast<uint32_t*>(dst)[3] = v.w;
        }
      }
    } else if (keep) {
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * quad_col) =
            cuda_backend::out_pair<T>(o[4 * j + 2 * h], o[4 * j + 2 * h + 1], inv[h]);
    }
    if (keep && a.lse != nullptr && quad_col == 0)
      a.lse[b_off * a.lse_stride_b + head * a.lse_stride_h + (e.seq.q_offset + r) * a.lse_stride_s] = lse[h];
  }
}

// A tile that sees no key gets o = 0 and lse = -inf with no MMA. Zeros need no quad transpose, so each
// lane of a quad stores its own quarter of the row: D/32 16-byte stores where out's rows are 16-byte
// aligned (D/8 4-byte ones otherwise), against store_rows's D/8 4-byte stores per row with two Q
// buffers. Taken by the block-sparse configs, where a mask that empties whole rows of tiles makes
// these stores most of the kernel's time; the dense configs keep store_rows (their empty tiles are
// rare, and they stay SASS-identical).
template <class T, class Cfg>
__device__ __forceinline__ void store_zero_rows(const FwdParams& p, const FwdTileFor<Cfg>& e, int row_in_tile,
                                                int quad_col) {
  static_assert(!Cfg::kSplit, "split configs store fp32 partials (store_partial)");
  constexpr int D = Cfg::kHeadDimV;
  static_assert((D / 4) * sizeof(T) % 16 == 0, "a lane's quarter row is whole 16-byte chunks");
  constexpr int kChunks = (D / 4) * sizeof(T) / 16;
  const int64_t b_off = e.seq.batch_coord;
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
  const cuda_backend::AttnParams& a = p.attn;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float inv = 0.f, lse = -INFINITY;
    const StoredRow w = stored_row(p, e, row_in_tile + 8 * h, heads, inv, lse);
    if (!w.keep) continue;
    const int64_t head = e.head + w.g;
    T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + (e.seq.q_offset + w.r) * a.out_stride_s +
             head * a.out_stride_h + quad_col * (D / 4);
    if (p.store.out_vec16) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) reinterpret_cast<uint4*>(out)[c] = make_uint4(0, 0, 0, 0);
    } else {
#pragma unroll
      for (int c = 0; c < 4 * kChunks; ++c) reinterpret_cast<uint32_t*>(out)[c] = 0u;
    }
    if (a.lse != nullptr && quad_col == 0)
      a.lse[b_off * a.lse_stride_b + head * a.lse_stride_h + (e.seq.q_offset + w.r) * a.lse_stride_s] = -INFINITY;
  }
}

}  // namespace fastattn::sm90
