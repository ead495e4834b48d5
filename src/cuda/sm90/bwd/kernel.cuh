// Hopper backward, main kernel. One CTA per (key block of 128, sequence, KV head): K and V are
// loaded once; a producer warp streams the (Q, dO, lse, D) of every q-block of 64 rows that the
// mask keeps, for every q head of the KV head's group, through a 2-stage TMA ring; two consumer
// warpgroups, 64 keys each, run per q-block (swap-AB: keys are the MMA rows, so P^T and dS^T land in
// registers in the A-operand layout):
//   S^T = K Q^T, dP^T = V dO^T                        (SS, both K-major)
//   P^T = exp2(S^T scale log2e - lse), dS^T = P^T (dP^T - D)   (softcap: times its derivative)
//   dV += P^T dO, dK += dS^T Q                         (RS, B N-major, accumulated over the group)
//   dS^T -> smem (stmatrix), both warpgroups meet, dQ = dS K  (SS, both MN-major, N split)
//   dQ -> smem in fragment order -> one bulk fp32 reduce-add into the q-block's accumulator run
// Deterministic mode orders each q-block's reduce-adds by key block (a semaphore per q-block).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/ptx>
#include <type_traits>

#include "cuda/common/bwd_seq.cuh"
#include "cuda/common/online_softmax.cuh"  // fast_exp2
#include "cuda/common/pack2.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

using cuda_backend::BwdParams;

constexpr int kBwdDsBar = 1;  // both consumer warpgroups: dS^T of this step is in smem
constexpr int kBwdDqBar = 2;  // 2, 3: a warpgroup's dQ staging buffer is free / written

template <class Cfg>
struct BwdSmem {
  alignas(1024) uint8_t k[Cfg::kKBytes];
  alignas(1024) uint8_t v[Cfg::kKBytes];
  alignas(1024) uint8_t q[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t dout[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t ds[2][Cfg::kBlockN * 128];  // dS^T, keys x 64 q rows: one atom; two steps deep
  alignas(128) float dq[64 * Cfg::kHeadDim];        // this step's dQ, fragment order
  alignas(16) float lse[Cfg::kStages][64];
  alignas(16) float dpsum[Cfg::kStages][64];
  uint64_t kv_full, q_full[Cfg::kStages], q_empty[Cfg::kStages];
};

// Shared-memory accesses by address: the smem struct is reached through an aligned integer, so
// the compiler no longer knows the pointers are shared and would emit generic loads and stores.
__device__ __forceinline__ float2 lds_f32x2(uint32_t addr) {
  float2 v;
  asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts_f32x4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// What one CTA works on: its key block, and the q-blocks (per q head) that the block sees.
struct BwdTile {
  cuda_backend::BwdSeq seq;
  cuda_backend::WindowMask mask;
  int n_block, batch, kv_head, n0;
  int m_begin, m_end;        // q-blocks seen (the same for every q head of the group)
  int full_begin, full_end;  // q-blocks kept whole: no mask
  __device__ __forceinline__ int steps(int q_per_kv) const { return m_end > m_begin ? q_per_kv * (m_end - m_begin) : 0; }
};

__device__ __forceinline__ BwdTile make_bwd_tile(const BwdParams& p, int item) {
  BwdTile t;
  int rest;
  if (p.det_chunk > 0) {  // BwdParams::det_chunk; a partial last chunk's extra blocks exit at once
    const int per_chunk = p.det_chunk * p.batch * p.heads_kv;
    rest = item % per_chunk / p.det_chunk;
    t.n_block = item / per_chunk * p.det_chunk + item % p.det_chunk;
  } else {
    t.n_block = item % p.n_blocks;
    rest = item / p.n_blocks;
  }
  t.kv_head = rest % p.heads_kv;
  t.batch = rest / p.heads_kv;
  t.seq = cuda_backend::bwd_seq(p, t.batch);
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.window_left, p.window_right};
  t.n0 = t.n_block * 128;
  t.mask.q_tile_range(t.n0, t.n0 + 128, 64, t.m_begin, t.m_end);
  t.mask.q_full_range(t.n0, t.n0 + 128, 64, t.full_begin, t.full_end);
  return t;
}

// Deterministic mode: how many key blocks before this one add into q-block m. The blocks that see m
// are contiguous (both ends of q_tile_range rise with the key block): the first is found by bisection.
__device__ __forceinline__ int dq_rank(const BwdTile& t, int m) {
  int lo = 0, hi = t.n_block;  // the first key block whose range ends past m lies in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    int b, e;
    t.mask.q_tile_range(mid * 128, mid * 128 + 128, 64, b, e);
    if (e > m) hi = mid;
    else lo = mid + 1;
  }
  return t.n_block - lo;
}

template <class Cfg>
__device__ __forceinline__ void bwd_produce(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t,
                                            const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv,
                                            const CUtensorMap* tdo) {
  const int kv_row = t.seq.k_offset + t.n0;
  mbar_expect_tx(&sm.kv_full, 2 * Cfg::kKBytes);
#pragma unroll
  for (int a = 0; a < Cfg::kAtoms; ++a) {
    tma_load_4d(sm.k + a * Cfg::kKAtomBytes, tk, a * kAtomCols, kv_row, t.kv_head, t.seq.batch_coord, &sm.kv_full);
    tma_load_4d(sm.v + a * Cfg::kKAtomBytes, tv, a * kAtomCols, kv_row, t.kv_head, t.seq.batch_coord, &sm.kv_full);
  }
  PipeState<Cfg::kStages> ps;
  for (int h = t.kv_head * p.q_per_kv; h < (t.kv_head + 1) * p.q_per_kv; ++h)
    for (int m = t.m_begin; m < t.m_end; ++m, ps.advance()) {
      const int s = ps.stage();
      mbar_wait(&sm.q_empty[s], ps.phase() ^ 1);
      mbar_expect_tx(&sm.q_full[s], 2 * Cfg::kQBytes + 2 * 64 * 4);
      const int q_row = t.seq.q_offset + m * 64;
#pragma unroll
      for (int a = 0; a < Cfg::kAtoms; ++a) {
        tma_load_4d(sm.q[s] + a * Cfg::kQAtomBytes, tq, a * kAtomCols, q_row, h, t.seq.batch_coord, &sm.q_full[s]);
        tma_load_4d(sm.dout[s] + a * Cfg::kQAtomBytes, tdo, a * kAtomCols, q_row, h, t.seq.batch_coord, &sm.q_full[s]);
      }
      const int64_t ws = int64_t(h) * p.padded_rows + t.seq.padded_q + m * 64;
      bulk_load(sm.lse[s], p.lse_log2 + ws, 64 * 4, &sm.q_full[s]);
      bulk_load(sm.dpsum[s], p.dpsum + ws, 64 * 4, &sm.q_full[s]);
    }
}

// Deterministic mode: once this thread's reduce-adds have landed, the next key block may add into
// their q-block (one count per warpgroup; dq_rank's waiters expect two per key block).
__device__ __forceinline__ void release_dq_turn(int*& sem) {
  if (sem == nullptr) return;
  tma_store_wait_all();
  asm volatile("fence.proxy.async.global;" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(sem) : "memory");
  sem = nullptr;
}

// dQ of one step for warpgroup wg's N columns from c0: dS (the step's dS^T buffer, MN-major A) times
// K's columns (MN-major B), issued behind the step's dV and dK MMAs (whose end frees the Q / dO
// stage), then staged and reduce-added into the q-block's accumulator run.
template <class T, class Cfg, int N>
__device__ __forceinline__ void bwd_dq(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t, int c0, int wg,
                                       int ds_buf, int h, int m, bool issuer, float (&dv)[Cfg::kHeadDim / 2],
                                       float (&dk)[Cfg::kHeadDim / 2], uint32_t (&pf)[4][4], uint32_t (&dsf)[4][4],
                                       uint64_t* q_empty, int*& pending_sem) {
  float dq[N / 2];
  const uint32_t a_lo = desc_mn_major_lo(sm.ds[ds_buf], Cfg::kBlockN * 128);
  const uint32_t b_lo = desc_mn_major_lo(sm.k + (c0 / kAtomCols) * Cfg::kKAtomBytes + (c0 % kAtomCols) * 2, Cfg::kKAtomBytes);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
    WgmmaSS<T, N, Major::MN, Major::MN>::run(dq, desc_mn_major(a_lo, kk), desc_mn_major(b_lo, kk), kk > 0);
  wgmma_commit();
  wgmma_wait<1>();  // dV, dK done: this stage's Q and dO are no longer read
  fence_operands(dv);
  fence_operands(dk);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // their A fragments were read until now: keep them from reuse
    fence_operands(pf[kk]);
    fence_operands(dsf[kk]);
  }
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(q_empty);
  wgmma_wait<0>();
  fence_operands(dq);
  // The accumulator run holds thread t's registers 4 q .. 4 q + 3 as float4 128 q + t (preprocess.cuh,
  // dq_accum_index): coalesced 512-byte rows per warp instruction.
  const int tid = threadIdx.x % 128;
  float* dst = p.dq_accum + (int64_t(h) * p.padded_rows + t.seq.padded_q + m * 64) * Cfg::kHeadDim + 64 * c0;
  if (!p.deterministic) {  // vector fp32 atomics (red.global.add.v4.f32), fire and forget
#pragma unroll
    for (int q = 0; q < N / 8; ++q)
      atomicAdd(reinterpret_cast<float4*>(dst) + 128 * q + tid,
                make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]));
    return;
  }
  // Deterministic: staged in smem, then one bulk reduce-add in this q-block's turn.
  // The staging buffer is free once the previous step's reduce-add has read it.
  if (issuer) tma_store_wait_read();
  named_bar_sync(kBwdDqBar + wg, 128);
  float* stage = sm.dq + 64 * c0;
  const uint32_t stage_addr = smem_addr(stage) + 16 * tid;
#pragma unroll
  for (int q = 0; q < N / 8; ++q) sts_f32x4(stage_addr + 2048 * q, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
  fence_smem_for_tma();
  named_bar_sync(kBwdDqBar + wg, 128);
  if (issuer) {
    if (p.deterministic) {
      // The previous step's adds are released now, a step after their issue, so that waiting for
      // them to land does not stall this warpgroup; then this q-block's turn is awaited.
      release_dq_turn(pending_sem);
      int* sem = p.dq_sem + (int64_t(t.batch) * p.heads_q + h) * p.m_blocks + m;
      const int want = 2 * dq_rank(t, m);
      int seen;
      do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(sem) : "memory");
      } while (seen < want);
      pending_sem = sem;
    }
    bulk_reduce_add_f32(dst, stage, 64 * N * 4);
    tma_store_commit();
  }
}

template <class T, class Cfg>
__device__ __forceinline__ void bwd_consume(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t, int wg) {
  constexpr int D = Cfg::kHeadDim;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4;
  const int key_row = t.n0 + wg * 64 + warp_in_wg * 16 + lane / 4;  // this thread's keys: + 0 and + 8
  const bool issuer = threadIdx.x % 128 == 0;
  int* pending_sem = nullptr;  // deterministic: the q-block semaphore of the last reduce-add, to release
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;

  const int steps = t.steps(p.q_per_kv);
  if (steps > 0) mbar_wait(&sm.kv_full, 0);
  const uint32_t k_lo = desc_k_major_lo(sm.k + wg * 64 * kAtomRowBytes);
  const uint32_t v_lo = desc_k_major_lo(sm.v + wg * 64 * kAtomRowBytes);
  // The dS^T buffer alternates with the steps, as the 2-stage ring does: its index is the stage.
  static_assert(Cfg::kStages == 2, "dS^T double buffer indexed by the ring stage");
  PipeState<Cfg::kStages> ps;
  for (int h = t.kv_head * p.q_per_kv; h < (t.kv_head + 1) * p.q_per_kv; ++h)
    for (int m = t.m_begin; m < t.m_end; ++m, ps.advance()) {
      const int s = ps.stage();
      mbar_wait(&sm.q_full[s], ps.phase());
      // Four groups in flight at most: S^T, dP^T; then dV behind dP^T, dK behind dV; dQ behind dK.
      float st[32], dpt[32];  // S^T and dP^T: 64 keys x 64 q rows
      {
        const uint32_t q_lo = desc_k_major_lo(sm.q[s]), do_lo = desc_k_major_lo(sm.dout[s]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          WgmmaSS<T, 64>::run(st, desc_k_major(k_lo, Cfg::kKAtomBytes, kk), desc_k_major(q_lo, Cfg::kQAtomBytes, kk),
                              kk > 0);
        wgmma_commit();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          WgmmaSS<T, 64>::run(dpt, desc_k_major(v_lo, Cfg::kKAtomBytes, kk),
                              desc_k_major(do_lo, Cfg::kQAtomBytes, kk), kk > 0);
        wgmma_commit();
      }
      // Partial q-blocks: masked scores to -inf by keep-bits (R2P + FSEL, as the forward), so that
      // P = exp2(-inf) = 0 with no per-element test after the exp.
      auto mask_scores = [&] {
        if (m >= t.full_begin && m < t.full_end) return;
        const int m0 = m * 64;
        cuda_backend::apply_keep_bits<64, 0>(
            st, cuda_backend::keep_bits<64>(t.mask.row_lo(key_row) - m0, t.mask.row_hi(key_row) - m0, quad_col));
        cuda_backend::apply_keep_bits<64, 1>(
            st, cuda_backend::keep_bits<64>(t.mask.row_lo(key_row + 8) - m0, t.mask.row_hi(key_row + 8) - m0, quad_col));
      };
      // P^T = exp2(S^T scale log2e - lse) (softcap: of the capped score, which st then keeps in log2
      // units for the derivative; P is recomputed from it below), as A fragments for dV += P^T dO.
      wgmma_wait<1>();
      fence_operands(st);
      uint32_t pf[4][4], dsf[4][4];  // P^T and dS^T as A fragments: 4 k-steps of 16 q rows
      // lse and D of this thread's column pair (8 j + 2 quad_col, + 1), j = 2 kk + r / 2.
      const uint32_t lse_addr = smem_addr(sm.lse[s]) + 8 * quad_col, dpsum_addr = smem_addr(sm.dpsum[s]) + 8 * quad_col;
      const float scale_log2 = p.scale_log2;
      // Element 8 kk + 2 r + e of the accumulators (= 4 j + 2 h + e, column group j = 2 kk + r / 2,
      // row half h = r % 2) is key row + 8 h, q column 8 j + 2 quad_col + e.
      auto p_phase = [&](auto softcap) {
        constexpr bool kCap = decltype(softcap)::value;
        if constexpr (kCap) {
#pragma unroll
          for (int i = 0; i < 32; ++i) st[i] = p.softcap * tanhf(st[i] * p.softcap_in) * scale_log2;
        }
        mask_scores();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const float2 lse = lds_f32x2(lse_addr + 32 * (2 * kk + r / 2));
            float pv[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& x = st[8 * kk + 2 * r + e];
              pv[e] = cuda_backend::fast_exp2((kCap ? x : x * scale_log2) - (e ? lse.y : lse.x));
              if constexpr (!kCap) x = pv[e];
            }
            pf[kk][r] = cuda_backend::pack2<T>(pv[0], pv[1]);
          }
      };
      if (p.softcap != 0.f)
        p_phase(std::true_type{});
      else
        p_phase(std::false_type{});
      {
        const uint32_t do_lo = desc_n_major_lo(sm.dout[s], Cfg::kQAtomBytes);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) WgmmaRS<T, D>::run(dv, pf[kk], desc_n_major(do_lo, kk), 1);
        wgmma_commit();
      }
      // dS^T = P^T (dP^T - D) (softcap: times 1 - tanh^2), as A fragments for dK += dS^T Q.
      wgmma_wait<1>();
      fence_operands(dpt);
      auto ds_phase = [&](auto softcap) {
        constexpr bool kCap = decltype(softcap)::value;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const float2 dps = lds_f32x2(dpsum_addr + 32 * (2 * kk + r / 2));
            float2 lse;
            if constexpr (kCap) lse = lds_f32x2(lse_addr + 32 * (2 * kk + r / 2));
            float ds[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int i = 8 * kk + 2 * r + e;
              float pv = st[i], dcap = 1.f;
              if constexpr (kCap) {  // masked: st = -inf, P = 0, tanh clamped to -1 (no 0 * inf)
                pv = cuda_backend::fast_exp2(st[i] - (e ? lse.y : lse.x));
                const float th = fmaxf(st[i] * p.tanh_of_log2, -1.f);
                dcap = 1.f - th * th;
              }
              ds[e] = pv * (dpt[i] - (e ? dps.y : dps.x)) * dcap;
            }
            dsf[kk][r] = cuda_backend::pack2<T>(ds[0], ds[1]);
          }
      };
      if (p.softcap != 0.f)
        ds_phase(std::true_type{});
      else
        ds_phase(std::false_type{});
      {
        const uint32_t q_lo = desc_n_major_lo(sm.q[s], Cfg::kQAtomBytes);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) WgmmaRS<T, D>::run(dk, dsf[kk], desc_n_major(q_lo, kk), 1);
        wgmma_commit();
      }
      // dS^T into the step's buffer in the 128-byte-swizzled layout (chunk c of row r at c ^ (r % 8)),
      // by stmatrix: per instruction the 8 x 8 blocks (rows + 0, + 8) x (column groups j, j + 1).
      {
        const int blk = lane / 8, r = warp_in_wg * 16 + (blk & 1) * 8 + lane % 8;
        const uint32_t row_base = smem_addr(sm.ds[s]) + (wg * 64 + r) * kAtomRowBytes;
        const uint32_t chunk_xor = ((blk >> 1) ^ (lane % 8)) * 16;
#pragma unroll
        for (int j = 0; j < 8; j += 2)
          stmatrix_x4(row_base + ((j * 16) ^ chunk_xor), dsf[j / 2][0], dsf[j / 2][1], dsf[j / 2][2], dsf[j / 2][3]);
        fence_smem_for_tma();  // wgmma reads smem through the async proxy
      }
      named_bar_sync(kBwdDsBar, 256);
      if (wg == 0)
        bwd_dq<T, Cfg, Cfg::kDqCols0>(sm, p, t, 0, 0, s, h, m, issuer, dv, dk, pf, dsf, &sm.q_empty[s], pending_sem);
      else
        bwd_dq<T, Cfg, Cfg::kDqCols1>(sm, p, t, Cfg::kDqCols0, 1, s, h, m, issuer, dv, dk, pf, dsf, &sm.q_empty[s], pending_sem);
    }
  if (issuer) {
    release_dq_turn(pending_sem);
    tma_store_wait_all();  // the staging buffer must outlive the last reduce-add's reads
  }

  // dK (times the softmax scale) and dV of this thread's two keys; keys past len_k hold 0.
  const int64_t b_off = t.seq.batch_coord;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int j = key_row + 8 * hh;
    if (j >= t.seq.rows_k) continue;
    const int64_t tok = t.seq.k_offset + j;
    T* gk = static_cast<T*>(p.dk) + b_off * p.dk_stride_b + tok * p.dk_stride_s + int64_t(t.kv_head) * p.dk_stride_h;
    T* gv = static_cast<T*>(p.dv) + b_off * p.dv_stride_b + tok * p.dv_stride_s + int64_t(t.kv_head) * p.dv_stride_h;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const int col = 8 * c + 2 * quad_col;
      *reinterpret_cast<uint32_t*>(gk + col) =
          cuda_backend::pack2<T>(dk[4 * c + 2 * hh] * p.scale, dk[4 * c + 2 * hh + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(gv + col) = cuda_backend::pack2<T>(dv[4 * c + 2 * hh], dv[4 * c + 2 * hh + 1]);
    }
  }
}

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    bwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tdo,
               const __grid_constant__ BwdParams p) {
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<BwdSmem<Cfg>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ int item_s;
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    // Deterministic mode: the work item is the CTA's start order, so a CTA waits (dq_rank) only on
    // CTAs that started before it, never on one that may not be resident yet.
    item_s = p.deterministic ? atomicAdd(p.tile_ticket, 1) : int(blockIdx.x);
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    prefetch_tma_map(&tdo);
    mbar_init(&sm.kv_full, 1);
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.q_full[s], 1);
      mbar_init(&sm.q_empty[s], 8);  // one arrival per consumer warp
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  const BwdTile t = make_bwd_tile(p, item_s);
  if (t.n0 >= t.seq.rows_k || t.n_block >= p.n_blocks) return;  // past the keys: nothing to load or store

  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x == 0 && t.steps(p.q_per_kv) > 0) bwd_produce<Cfg>(sm, p, t, &tq, &tk, &tv, &tdo);
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    bwd_consume<T, Cfg>(sm, p, t, warp / 4 - 1);
  }
}

}  // namespace fastattn::sm90
