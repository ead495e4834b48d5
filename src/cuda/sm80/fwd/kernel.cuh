// The Ampere forward kernel (FA2's algorithm): one CTA per (batch, head, 128-row m-block) tile of the
// schedule. Q lands in smem once; the tile's key blocks (the window's BlockRange, walked last first)
// stream through a cp.async ring one block ahead of the math; per block each warp computes S = Q K^T
// for its 32 rows with mma.sync m16n8k16 (A from Q by ldmatrix, B from K by ldmatrix), masks the
// partial blocks with keep-bits (mask/keep_bits.cuh: the m16n8 C layout), runs the online softmax
// in registers, and feeds P from the same registers as the A operand of O += P V (B from V by
// ldmatrix.trans). Rows that keep no key end with out 0 and lse -inf, as in every other kernel.
// kDecode: the same kernel for forward_kvcache and split-KV (a twin, so that the plain kernel's code stays
// as measured): K / V from a KV cache's row (cache_batch_idx) after its left padding, or gathered row by
// row through the page table, and, with splits, each CTA one split of a tile writing fp32 partials that
// split_combine merges.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/math.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/seqlen.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sched/tile_order.cuh"
#include "cuda/sm80/fwd/config.h"
#include "cuda/sm80/fwd/params.h"
#include "cuda/sm80/prim/mma.cuh"
#include "cuda/sm80/prim/smem_tile.cuh"

namespace fastattn::sm80 {

template <class T, class Cfg, bool kDecode = false>
__global__ void __launch_bounds__(Cfg::kThreads, 1) fwd_kernel(const __grid_constant__ Sm80FwdParams p) {
  constexpr int D = Cfg::kHeadDim, BN = Cfg::kBlockN, MT = Cfg::kMTiles, S = Cfg::kStages;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  const uint32_t q_s = smem_u32(smem_raw);
  const uint32_t k_s = q_s + Cfg::kQBytes;                   // stage s: k_s + s * kKVBytes
  const uint32_t v_s = k_s + S * Cfg::kKVBytes;

  const cuda_backend::AttnParams& a = p.attn;
  int tile = int(blockIdx.x), split = 0;
  if constexpr (kDecode) {  // block = tile * splits + split
    tile = int(p.split.splits.div(unsigned(tile)));
    split = int(blockIdx.x) - tile * int(p.split.splits.d);
  }
  const cuda_backend::TileCoord tc = cuda_backend::tile_coord(p.sched, p.sched.div, a, tile);
  const cuda_backend::SeqInfo seq(a, tc.batch);
  const int m0 = tc.m_block * Cfg::kBlockM;
  if (m0 >= seq.rows_q) return;  // a varlen sequence shorter than the longest
  const cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, a.window_left, a.window_right};
  const int m1 = min(m0 + Cfg::kBlockM, seq.len_q);
  cuda_backend::BlockRange blocks{0, 0, 0, 0};
  if (m0 < m1) blocks = cuda_backend::key_blocks(mask, m0, m1, BN);
  if constexpr (kDecode) blocks = cuda_backend::split_share(blocks, split, int(p.split.splits.d));
  const int n_blocks = blocks.empty() ? 0 : blocks.count();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const char* q_slice = static_cast<const char*>(p.q.data) +
                        2 * (seq.batch_coord * p.q.stride_b + int64_t(seq.q_offset) * p.q.stride_s + tc.head * p.q.stride_h);
  // The sequence's K / V: batch entry (a KV cache: its row) and the position of key 0 (varlen: the
  // packed offset; a KV cache: its left padding). Fixed-length calls only carry a cache (batch_coord = b).
  int64_t kv_batch = seq.batch_coord, kv_row0 = seq.k_offset;
  if constexpr (kDecode) {
    if (p.kv.batch_idx != nullptr) kv_batch = p.kv.batch_idx[seq.batch_coord];
    if (p.kv.leftpad != nullptr) kv_row0 += p.kv.leftpad[seq.batch_coord];
  }
  const char* k_slice = static_cast<const char*>(p.k.data) +
                        2 * (kv_batch * p.k.stride_b + kv_row0 * p.k.stride_s + tc.kv_head * p.k.stride_h);
  const char* v_slice = static_cast<const char*>(p.v.data) +
                        2 * (kv_batch * p.v.stride_b + kv_row0 * p.v.stride_s + tc.kv_head * p.v.stride_h);
  // Block b_i = blocks.end - 1 - i, the i-th of the walk (last first), into ring stage i % S. A paged
  // cache (kDecode): key j at page table[b][j / page_size], position j % page_size of that page (no left
  // padding with pages: validation refuses it), looked up per row; rows past len_k look up nothing.
  [[maybe_unused]] const int32_t* pages = nullptr;
  if constexpr (kDecode) {
    if (p.kv.page_table != nullptr) pages = p.kv.page_table + int64_t(seq.batch_coord) * p.kv.pages_per_seq;
  }
  auto load_kv = [&](uint32_t dst, const Operand80& src, const char* slice, int i) {
    const int row0 = (blocks.end - 1 - i) * BN;
    if constexpr (kDecode) {
      if (pages != nullptr) {
        const char* head = static_cast<const char*>(src.data) + 2 * tc.kv_head * src.stride_h;
        load_rows_at<Cfg, BN>(dst, head, row0, seq.len_k, [&](int j) {
          const int page = __ldg(pages + p.kv.page_size.div(unsigned(j)));
          return head + 2 * (int64_t(page) * src.stride_b + int64_t(p.kv.page_size.mod(unsigned(j))) * src.stride_s);
        });
        return;
      }
    }
    load_rows<Cfg, BN>(dst, slice, 2 * src.stride_s, row0, seq.len_k);
  };
  auto load_k = [&](int i) { load_kv(k_s + (i % S) * Cfg::kKVBytes, p.k, k_slice, i); };
  auto load_v = [&](int i) { load_kv(v_s + (i % S) * Cfg::kKVBytes, p.v, v_slice, i); };
  // Prologue: Q with K of block 0 (S = 1), or Q and the first S - 1 blocks, one commit group each
  // (Q rides with block 0).
  if (n_blocks > 0) load_rows<Cfg, Cfg::kBlockM>(q_s, q_slice, 2 * p.q.stride_s, m0, seq.len_q);
  if constexpr (S == 1) {
    if (n_blocks > 0) load_k(0);
    cp_async_commit();
  }
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < n_blocks) {
      load_k(i);
      load_v(i);
    }
    cp_async_commit();
  }

  float o[MT][D / 2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < D / 2; ++j) o[mt][j] = 0.f;
  cuda_backend::OnlineSoftmax<BN> softmax[MT];

  // Per-lane ldmatrix addresses (bytes from a tile's base, before the chunk's XOR): A from Q rows
  // warp * 32 + mt * 16 + lane % 16, chunk half lane / 16; B from K rows (lane / 16) * 8 + lane % 8,
  // chunk half (lane / 8) % 2; B^T from V rows lane % 8 + ((lane / 8) % 2) * 8, chunk half lane / 16.
  const int x = lane & 7;
  const uint32_t q_row = uint32_t((warp * 16 * MT + (lane & 15)) * Cfg::kRowBytes);
  const int q_half = lane >> 4;
  const uint32_t k_row = uint32_t(((lane >> 4) * 8 + x) * Cfg::kRowBytes);
  const int k_half = (lane >> 3) & 1;
  const uint32_t v_row = uint32_t((x + ((lane >> 3) & 1) * 8) * Cfg::kRowBytes);
  const int v_half = lane >> 4;

  for (int i = 0; i < n_blocks; ++i) {
    if constexpr (S == 1) {  // FA2's order: V_i loads under QK and the softmax, K_{i+1} under PV
      cp_async_wait<0>();    // K_i (and Q) landed for this thread's copies
      __syncthreads();       // ... and everyone's; every warp is done with V_{i-1}
      load_v(i);
      cp_async_commit();
    } else {
      cp_async_wait<S - 2>();  // block i (and Q) landed for this thread's copies
      __syncthreads();         // ... and everyone's; stage (i - 1) % S is free again
      if (i + S - 1 < n_blocks) {
        load_k(i + S - 1);
        load_v(i + S - 1);
      }
      cp_async_commit();
    }
    const int blk = blocks.end - 1 - i, n0 = blk * BN, st = i % S;
    const uint32_t kb = k_s + st * Cfg::kKVBytes, vb = v_s + st * Cfg::kKVBytes;

    // S = Q K^T
    float s[MT][BN / 2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) s[mt][j] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4(qa[mt], q_s + q_row + mt * 16 * Cfg::kRowBytes + (((2 * kk + q_half) ^ x) << 4));
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf, kb + k_row + np * 16 * Cfg::kRowBytes + (((2 * kk + k_half) ^ x) << 4));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          float(&c0)[4] = *reinterpret_cast<float(*)[4]>(&s[mt][8 * np]);
          float(&c1)[4] = *reinterpret_cast<float(*)[4]>(&s[mt][8 * np + 4]);
          mma16816<T>(c0, qa[mt], kf[0], kf[1]);
          mma16816<T>(c1, qa[mt], kf[2], kf[3]);
        }
      }
    }

    // Softcap with CUDA's accurate tanhf, not the sm90 kernels' tanh.approx (common/softcap.cuh): with
    // MUFU.TANH ptxas spills the d 128 FA2-order kernel (at 255 registers: 72 bytes). sm80 has
    // no softcap backward, so no backward depends on this forward's tanh.
    if (a.softcap != 0.f) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) s[mt][j] = a.softcap * tanhf(s[mt][j] * a.softcap_in);
    }
    if (!blocks.full(blk)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r = m0 + warp * 16 * MT + mt * 16 + g;
        const auto k0 = cuda_backend::keep_bits<BN>(mask.lo(r) - n0, mask.hi(r) - n0, t);
        const auto k1 = cuda_backend::keep_bits<BN>(mask.lo(r + 8) - n0, mask.hi(r + 8) - n0, t);
        cuda_backend::apply_keep_bits<BN, 0>(s[mt], k0);
        cuda_backend::apply_keep_bits<BN, 1>(s[mt], k1);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float alpha[2];
      softmax[mt].step(s[mt], a.scale_log2, alpha);
      cuda_backend::scale_rows<D>(o[mt], alpha);
    }

    if constexpr (S == 1) {
      cp_async_wait<0>();  // V_i landed
      __syncthreads();     // ... everyone's, and every warp is done with K_i
      if (i + 1 < n_blocks) load_k(i + 1);
      cp_async_commit();
    }

    // O += P V, P from the S registers: keys 16 kk .. 16 kk + 15 are n-tiles 2 kk and 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = cuda_backend::pack2<T>(s[mt][8 * kk + 0], s[mt][8 * kk + 1]);
        pa[mt][1] = cuda_backend::pack2<T>(s[mt][8 * kk + 2], s[mt][8 * kk + 3]);
        pa[mt][2] = cuda_backend::pack2<T>(s[mt][8 * kk + 4], s[mt][8 * kk + 5]);
        pa[mt][3] = cuda_backend::pack2<T>(s[mt][8 * kk + 6], s[mt][8 * kk + 7]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vb + v_row + kk * 16 * Cfg::kRowBytes + (((2 * dp + v_half) ^ x) << 4));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          float(&c0)[4] = *reinterpret_cast<float(*)[4]>(&o[mt][8 * dp]);
          float(&c1)[4] = *reinterpret_cast<float(*)[4]>(&o[mt][8 * dp + 4]);
          mma16816<T>(c0, pa[mt], vf[0], vf[1]);
          mma16816<T>(c1, pa[mt], vf[2], vf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may land after the CTA exits

  // Epilogue: O / sum and the LSE, rows below rows_q; rows at or past len_q (seqused) keep no key, and
  // they and rows that keep none store exactly 0 (out_pair's select: their zero-filled Q still met K, and a
  // NaN or Inf in a used K or V made their O NaN, which a multiply by 0 keeps).
  const int64_t b_off = seq.batch_coord;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2], lse[2];
    softmax[mt].finish(inv, lse);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m0 + warp * 16 * MT + mt * 16 + g + 8 * h;
      if (r >= seq.len_q) {
        inv[h] = 0.f;
        lse[h] = -INFINITY;
      }
      if (r >= seq.rows_q) continue;
      if constexpr (kDecode) {
        if (p.split.o_part != nullptr) {  // split-KV: this split's partial row (split_combine.h's order)
          const Sm80Split& sp = p.split;
          // (the split again from the block index: held over the loop it cost a register at the bound)
          const int sp_i = int(blockIdx.x) - int(sp.splits.div(blockIdx.x)) * int(sp.splits.d);
          const int64_t row = sp_i * sp.rows + (b_off * a.heads_q + tc.head) * sp.rows_per_head + seq.q_offset + r;
          float* dst = sp.o_part + row * D + 2 * t;
#pragma unroll
          for (int j = 0; j < D / 8; ++j)
            *reinterpret_cast<float2*>(dst + 8 * j) =
                make_float2(o[mt][4 * j + 2 * h] * inv[h], o[mt][4 * j + 2 * h + 1] * inv[h]);
          if (t == 0) sp.lse_part[row] = lse[h];
          continue;
        }
      }
      T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + (seq.q_offset + r) * a.out_stride_s +
               tc.head * a.out_stride_h;
      const uint32_t keep = inv[h] == 0.f ? 0u : ~0u;  // out_pair's select, once a row
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * t) =
            cuda_backend::pack2<T>(o[mt][4 * j + 2 * h] * inv[h], o[mt][4 * j + 2 * h + 1] * inv[h]) & keep;
      if (a.lse != nullptr && t == 0)
        a.lse[b_off * a.lse_stride_b + tc.head * a.lse_stride_h + (seq.q_offset + r) * a.lse_stride_s] = lse[h];
    }
  }
}

}  // namespace fastattn::sm80
