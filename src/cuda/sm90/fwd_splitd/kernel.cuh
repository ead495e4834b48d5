// The Hopper split-D forward (d_qk, d_v up to 1024; docs/notes/splitd-sm90.md). One CTA: 64 query
// rows of one (batch, head) and a pair of 256-column slices of O. A producer thread streams Q once
// and, per key block, K chunk by chunk then the pair's V chunks through one ring of 64 x 64 atoms;
// each consumer warpgroup runs the whole FA loop for its slice: S = Q K^T over every K chunk (SS
// wgmma), mask, online softmax, O_slice += P V_slice (RS wgmma). Both warpgroups compute the same S
// from the same smem operands in the same order, so their P, max and sum are the same bits: no
// exchange between them. Not persistent: one CTA per (m-block, slice pair, head, batch).
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <type_traits>

#include "cuda/common/attn_params.h"
#include "cuda/common/math.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/seqlen.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/fwd_splitd/config.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

struct SplitDParams {
  cuda_backend::AttnParams attn;
  int qk_atoms;  // d_qk / 64
  int v_atoms;   // d_v / 64
  int pairs;     // slice pairs: ceil(v_atoms / kPairAtoms)
  int m_blocks;  // 64-row blocks of the longest query sequence
};

struct SplitDSmem {
  using Cfg = SplitDConfig;
  alignas(1024) uint8_t q[Cfg::kMaxAtoms][Cfg::kChunkBytes];
  alignas(1024) uint8_t ring[Cfg::kRingSlots][Cfg::kChunkBytes];
  uint64_t q_full;
  uint64_t full[Cfg::kRingSlots], empty[Cfg::kRingSlots];
};

// The CTA's tile: its sequence, rows [m0, m0 + 64), slice pair and key blocks (last first, as the
// main forward walks them). Producer and consumers derive it alike from the block index.
struct SplitDTile {
  cuda_backend::SeqInfo seq;
  cuda_backend::WindowMask mask;
  int head, kv_head, m0, pair;
  cuda_backend::BlockRange blocks;
};

// kKeys: the key block (64 here, 128 in the key-split variant).
template <int kKeys = SplitDConfig::kKeys>
__device__ __forceinline__ SplitDTile splitd_tile(const SplitDParams& p) {
  using Cfg = SplitDConfig;
  SplitDTile t;
  t.pair = int(blockIdx.x) % p.pairs;
  // The longest rows first (causal: the last m-blocks see the most keys), so that the grid's tail
  // holds the short ones.
  const int m_block = p.m_blocks - 1 - int(blockIdx.x) / p.pairs;
  t.head = int(blockIdx.y);
  t.kv_head = t.head / p.attn.q_per_kv;
  t.seq = cuda_backend::SeqInfo(p.attn, int(blockIdx.z));
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.m0 = m_block * Cfg::kRows;
  const int m1 = min(t.m0 + Cfg::kRows, t.seq.len_q);
  t.blocks = cuda_backend::BlockRange{0, 0, 0, 0};
  if (t.m0 < m1) t.blocks = cuda_backend::key_blocks(t.mask, t.m0, m1, kKeys);
  return t;
}

// Producer (one thread): Q's atoms once, then per key block K's d_qk / 64 chunks and the pair's V
// chunks, each into the next ring slot once both warpgroups released it.
__device__ __forceinline__ void splitd_produce(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t,
                                               const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv) {
  using Cfg = SplitDConfig;
  mbar_expect_tx(&sm.q_full, uint32_t(p.qk_atoms * Cfg::kChunkBytes));
  for (int a = 0; a < p.qk_atoms; ++a)
    tma_load_4d(sm.q[a], tq, a * kAtomCols, t.seq.q_offset + t.m0, t.head, t.seq.batch_coord, &sm.q_full);
  PipeState<Cfg::kRingSlots> ps;
  auto load = [&](const CUtensorMap* map, int col, int row) {
    mbar_wait(&sm.empty[ps.stage()], ps.phase() ^ 1);
    mbar_expect_tx(&sm.full[ps.stage()], Cfg::kChunkBytes);
    tma_load_4d(sm.ring[ps.stage()], map, col, row, t.kv_head, t.seq.batch_coord, &sm.full[ps.stage()]);
    ps.advance();
  };
  // All of the pair's V chunks, also those past d_v (TMA fills them with zeros and counts their
  // bytes): the consumers' PV then has no run-time branch around a wgmma, which made ptxas
  // serialize every wgmma of the kernel (C7518).
  const int v_col0 = t.pair * Cfg::kPairAtoms * kAtomCols;
  for (int it = t.blocks.first(); !t.blocks.done(it); it = t.blocks.next(it)) {
    const int row = t.seq.k_offset + it * Cfg::kKeys;
    for (int a = 0; a < p.qk_atoms; ++a) load(tk, a * kAtomCols, row);
    for (int a = 0; a < Cfg::kPairAtoms; ++a) load(tv, v_col0 + a * kAtomCols, row);
  }
}

// One consumer warpgroup (kWG 0 or 1): the pair's slice kWG, columns [256 (2 pair + kWG), + 256).
// A template on the warpgroup, so that which V chunks it multiplies is known at compile time (no
// wgmma under a run-time branch).
template <class T, int kWG>
__device__ __forceinline__ void splitd_consume(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t) {
  using Cfg = SplitDConfig;
  constexpr int wg = kWG;
  constexpr int N = Cfg::kKeys;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4;
  const int row_in_tile = warp_in_wg * 16 + lane / 4;  // this thread's rows: +0 and +8
  float o[Cfg::kSliceAtoms][32];                        // O's slice as four 64-column quarters
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
#pragma unroll
  for (int q = 0; q < Cfg::kSliceAtoms; ++q)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[q][i] = 0.f;
  auto release = [&](int slot) {  // per warp, once its wgmma reads of the slot are done
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.empty[slot]);
  };
  PipeState<Cfg::kRingSlots> ps;
  if (!t.blocks.empty()) mbar_wait(&sm.q_full, 0);
  const uint32_t q_lo = desc_k_major_lo(sm.q[0]);
  for (int it = t.blocks.first(); !t.blocks.done(it); it = t.blocks.next(it)) {
    // S = Q K^T, one commit group per K chunk; a chunk's slot goes back once the group after it is
    // issued and it has retired, so a warpgroup holds at most two K chunks.
    auto issue_qk_chunk = [&](int a, bool accumulate) {
      mbar_wait(&sm.full[ps.stage()], ps.phase());
      const uint32_t k_lo = desc_k_major_lo(sm.ring[ps.stage()]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        WgmmaSS<T, N>::run(s, desc_k_major(q_lo, Cfg::kChunkBytes, 4 * a + kk), desc_k_major(k_lo, Cfg::kChunkBytes, kk),
                           accumulate || kk > 0);
      wgmma_commit();
    };
    issue_qk_chunk(0, false);
    int held = ps.stage();
    ps.advance();
    for (int a = 1; a < p.qk_atoms; ++a) {
      issue_qk_chunk(a, true);
      wgmma_wait<1>();
      release(held);
      held = ps.stage();
      ps.advance();
    }
    wgmma_wait<0>();
    fence_operands(s);
    release(held);
    // Softcap, then the mask on partial blocks (the main forward's order).
    if (p.attn.softcap != 0.f) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) s[i] = p.attn.softcap * tanhf(s[i] * p.attn.softcap_in);
    }
    if (!t.blocks.full(it)) {
      const int row0 = t.m0 + row_in_tile, row1 = row0 + 8, n0 = it * N;
      cuda_backend::apply_keep_bits<N, 0>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col));
      cuda_backend::apply_keep_bits<N, 1>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col));
    }
    softmax.step(s, p.attn.scale_log2, alpha);
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int q = 0; q < Cfg::kSliceAtoms; ++q) cuda_backend::scale_rows<64>(o[q], alpha);
    }
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = cuda_backend::pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    // O_slice += P V: the pair's eight V chunks in order; this warpgroup's four (chunks 4 kWG ..
    // 4 kWG + 3) into its quarters, the other warpgroup's waited for and released untouched (every
    // slot takes both warpgroups' arrivals, each after the slot was filled).
    int mine[Cfg::kSliceAtoms];
#pragma unroll
    for (int a = 0; a < Cfg::kPairAtoms; ++a) {
      mbar_wait(&sm.full[ps.stage()], ps.phase());
      if (a / Cfg::kSliceAtoms == wg) {
        const uint32_t v_lo = desc_n_major_lo(sm.ring[ps.stage()], Cfg::kChunkBytes);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < N / 16; ++kk)
          WgmmaRS<T, 64>::run(o[a % Cfg::kSliceAtoms], pf[kk], desc_n_major(v_lo, kk), 1);
        wgmma_commit();
        mine[a % Cfg::kSliceAtoms] = ps.stage();
      } else {
        release(ps.stage());
      }
      ps.advance();
      if (a == Cfg::kSliceAtoms * wg + Cfg::kSliceAtoms - 1) {  // this warpgroup's last chunk
        wgmma_wait<0>();
#pragma unroll
        for (int q = 0; q < Cfg::kSliceAtoms; ++q) fence_operands(o[q]);
#pragma unroll
        for (int kk = 0; kk < N / 16; ++kk) fence_operands(pf[kk]);  // P is rewritten next block
#pragma unroll
        for (int q = 0; q < Cfg::kSliceAtoms; ++q) release(mine[q]);
      }
    }
  }
  // Out and LSE: this warpgroup's quarters that lie inside d_v; LSE once (warpgroup 0, pair 0).
  float inv[2], lse[2];
  softmax.finish(inv, lse);
  const cuda_backend::AttnParams& a = p.attn;
  const int64_t b_off = t.seq.batch_coord;
  const int col0 = (t.pair * Cfg::kPairAtoms + wg * Cfg::kSliceAtoms) * kAtomCols;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = t.m0 + row_in_tile + 8 * h;
    if (r >= t.seq.rows_q) continue;
    if (r >= t.seq.len_q) {  // past seqused: out 0, lse -inf (the reference's convention)
      inv[h] = 0.f;
      lse[h] = -INFINITY;
    }
    T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + int64_t(t.seq.q_offset + r) * a.out_stride_s +
             int64_t(t.head) * a.out_stride_h + col0;
#pragma unroll
    for (int q = 0; q < Cfg::kSliceAtoms; ++q) {
      if (col0 + q * kAtomCols >= p.v_atoms * kAtomCols) continue;  // past d_v (TMA's zero fill)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<uint32_t*>(out + q * kAtomCols + 8 * j + 2 * quad_col) =
            cuda_backend::pack2<T>(o[q][4 * j + 2 * h] * inv[h], o[q][4 * j + 2 * h + 1] * inv[h]);
    }
    if (a.lse != nullptr && wg == 0 && t.pair == 0 && quad_col == 0)
      a.lse[b_off * a.lse_stride_b + int64_t(t.head) * a.lse_stride_h + int64_t(t.seq.q_offset + r) * a.lse_stride_s] =
          lse[h];
  }
}

template <class T>
__global__ void __launch_bounds__(SplitDConfig::kThreads, 1)
    splitd_fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                      const __grid_constant__ CUtensorMap tv, const __grid_constant__ SplitDParams p) {
  using Cfg = SplitDConfig;
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<SplitDSmem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const SplitDTile t = splitd_tile(p);
  if (t.m0 >= t.seq.rows_q) return;  // past this sequence's rows (varlen: a shorter one), whole CTA
  if (threadIdx.x == 0) {
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    mbar_init(&sm.q_full, 1);
#pragma unroll
    for (int s = 0; s < Cfg::kRingSlots; ++s) {
      mbar_init(&sm.full[s], 1);
      mbar_init(&sm.empty[s], 4 * Cfg::kConsumerWarpgroups);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x == 0 && !t.blocks.empty()) splitd_produce(sm, p, t, &tq, &tk, &tv);
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    if (threadIdx.x < 256)
      splitd_consume<T, 0>(sm, p, t);
    else
      splitd_consume<T, 1>(sm, p, t);
  }
}

}  // namespace fastattn::sm90
