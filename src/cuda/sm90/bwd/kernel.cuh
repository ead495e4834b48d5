// Hopper backward, main kernel. One CTA per (key block of 128, sequence, KV head): K and V are
// loaded once; a producer warp streams the (Q, dO, lse, D) of every q-block (64 rows; 128 at d 64;
// 80 at d 128 without mask) that the mask keeps, for every q head of the KV head's group, through a
// 2-stage TMA ring; two consumer warpgroups, 64 keys each, run per q-block (swap-AB: keys are the
// MMA rows, so P^T and dS^T land in registers in the A-operand layout):
//   S^T = K Q^T, dP^T = V dO^T                        (SS, both K-major)
//   P^T = exp2(S^T scale log2e - lse), dS^T = P^T (dP^T - D)   (softcap: times its derivative)
//   dV += P^T dO, dK += dS^T Q                         (RS, B N-major, accumulated over the group)
//   dS^T -> smem (stmatrix), both warpgroups meet, dQ = dS K  (SS, both MN-major, N split; at
//   d 64's 128-row q-blocks split on the q rows instead; at d 128's 80-row q-blocks swapped,
//   dQ^T = K^T dS^T with M = d split, dS stored q-major by stmatrix.trans)
//   (d 128 / 64: dK issued behind dQ, so that adding dQ overlaps it; d 96: before the meeting)
//   dQ into the q-block's fp32 accumulator run (dq.cuh): staged in smem for a writer warp's bulk
//   reduce-add (deterministic mode: in an order fixed by key block, a semaphore per q-block), or
//   at d 64 / 96 in the default mode by vector atomics
// and at the end dK, dV from registers (epilogue.cuh). The producer is in producer.cuh.
// d > 128 (BwdConfig::kSplitD): a CTA holds 64 keys and both warpgroups share them. S^T / dP^T are
// split on the q rows (32 per warpgroup); P^T and dS^T go to smem, and dV, dK become SS MMAs split
// on the head dim (dQ too), each issued once both warpgroups' tile is stored; dQ is staged in the
// step's own Q / dO stage and bulk-added (dq.cuh), the stage released a step later.
// d_v != d_qk (192 / 128: BwdConfig's DV): the same kernel with V and dO in d_v's atoms, dP^T = V dO^T
// over d_v and dV split on d_v (kDvCols*, 64 + 64), stored apart from dK (store_dk_dv_apart).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/ptx>
#include <type_traits>

#include "cuda/common/grid_dependency.cuh"
#include "cuda/common/math.cuh"            // pack2
#include "cuda/common/online_softmax.cuh"  // fast_exp2
#include "cuda/common/softcap.cuh"          // softcap_score: the forward's tanh
#include "cuda/mask/keep_bits.cuh"
#include "cuda/sm90/bwd/bit_lists.h"
#include "cuda/sm90/bwd/band_dq.cuh"
#include "cuda/sm90/bwd/bias.cuh"
#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/bwd/dq.cuh"
#include "cuda/sm90/bwd/epilogue.cuh"
#include "cuda/sm90/bwd/producer.cuh"
#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/stamps.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/bwd/zero_rows.cuh"
#include "cuda/sm90/prim/ldmatrix.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// Split shape: acc (this warpgroup's N columns of dV or dK, from c0) += the keys x 64 q rows tile `a`
// (P^T or dS^T in smem, K-major) times `b`'s columns [c0, c0 + N) (dO or Q, N-major).
template <class T, class Cfg, int N, int R>
__device__ __forceinline__ void mma_dkv_split(float (&acc)[R], const uint8_t* a, const uint8_t* b, int c0) {
  static_assert(N / 2 <= R);
  float(&acc_n)[N / 2] = reinterpret_cast<float(&)[N / 2]>(acc);
  const uint32_t a_lo = desc_k_major_lo(a);
  const uint32_t b_lo = desc_n_major_lo(b + (c0 / kAtomCols) * Cfg::kQAtomBytes, Cfg::kQAtomBytes);
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockM / 16; ++kk)
    WgmmaSS<T, N, Major::K, Major::MN>::run(acc_n, desc_k_major_add(a_lo, Cfg::kKAtomBytes, kk),
                                            desc_n_major_add(b_lo, kk), 1);
}
// Warpgroup wg's share, kCols0 or kCols1 columns (dK's kDkvCols*, dV's kDvCols*; one code path when the shares
// are equal: accumulators in the same registers on two branches make ptxas add warpgroup fences).
template <class T, class Cfg, int kCols0, int kCols1, int R>
__device__ __forceinline__ void mma_dkv_split_wg(float (&acc)[R], const uint8_t* a, const uint8_t* b, int wg) {
  wgmma_fence();
  if constexpr (kCols0 == kCols1)
    mma_dkv_split<T, Cfg, kCols0>(acc, a, b, wg * kCols0);
  else if (wg == 0)
    mma_dkv_split<T, Cfg, kCols0>(acc, a, b, 0);
  else
    mma_dkv_split<T, Cfg, kCols1>(acc, a, b, kCols0);
  wgmma_commit();
}
template <class T, class Cfg>
__device__ __forceinline__ void mma_dk_split_wg(float (&dk)[Cfg::kDkvColsMax / 2], const uint8_t* ds, const uint8_t* q,
                                                int wg) {
  mma_dkv_split_wg<T, Cfg, Cfg::kDkvCols0, Cfg::kDkvCols1>(dk, ds, q, wg);
}
template <class T, class Cfg>
__device__ __forceinline__ void mma_dv_split_wg(float (&dv)[Cfg::kDvColsMax / 2], const uint8_t* pt, const uint8_t* dout,
                                                int wg) {
  mma_dkv_split_wg<T, Cfg, Cfg::kDvCols0, Cfg::kDvCols1>(dv, pt, dout, wg);
}

// d <= 128: dV += P^T dO, P^T from registers (A fragments, k-steps of 16 q rows), dO N-major.
template <class T, class Cfg>
__device__ __forceinline__ void mma_dv_rs(float (&dv)[Cfg::kDvColsMax / 2], const uint32_t (&pf)[Cfg::kSdpCols / 16][4],
                                          const uint8_t* dout) {
  const uint32_t do_lo = desc_n_major_lo(dout, Cfg::kQAtomBytes);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockM / 16; ++kk)
    WgmmaRS<T, Cfg::kHeadDimV>::run(dv, pf[kk], desc_n_major_add(do_lo, kk), 1);
  wgmma_commit();
}

// The softcap path of the consumers' step: a run-time branch on BwdParams' softcap, or fixed at
// compile time in the kernels that the config builds with and without it (BwdConfig::kSoftcapKernel).
enum class BwdCap { Runtime, Off, On };
// phase(std::bool_constant<capped>): the step's phase with or without the softcap's math.
template <BwdCap kCapPath, class Phase>
__device__ __forceinline__ void with_softcap_path(const BwdParams& p, Phase&& phase) {
  if constexpr (kCapPath == BwdCap::Runtime) {
    if (p.attn.softcap != 0.f)
      phase(std::true_type{});
    else
      phase(std::false_type{});
  } else {
    phase(std::bool_constant<kCapPath == BwdCap::On>{});
  }
}

// How many of S^T's k-steps take K from registers in the kernel of (kDet, kCapPath) (BwdConfig::kKRegSteps*):
// the default mode's without the softcap path, or with the run-time branch where the config builds no softcap
// kernel (d 96; where it builds one, the run-time branch is the ring's kernel: none); the deterministic
// mode's without the softcap path; the default mode's softcap kernel. A thread holds 4 registers a k-step over
// the whole tile, so each kernel's count is what its registers were shown to hold (notes, session 34).
template <class Cfg, bool kDet, BwdCap kCapPath>
constexpr int bwd_k_reg_steps() {
  if constexpr (kDet) return kCapPath == BwdCap::Off ? Cfg::kKRegStepsDet : 0;
  else if constexpr (kCapPath == BwdCap::On) return Cfg::kKRegStepsCap;
  else if constexpr (kCapPath == BwdCap::Runtime && Cfg::kSoftcapKernel) return 0;
  else return Cfg::kKRegSteps;
}

// One tile's steps and its dK / dV. The ring's and the dQ staging's pipe states run on from the CTA's
// previous tile (paired key blocks, the band's key blocks); kv_phase: the parity of the K / V loads
// before this tile's. kBand: a key block of the recompute band (band_kernel.cuh): dQ by the step's job
// (band_dq.cuh, `jobs`), and dK / dV stored only where store_dkdv (not for the band's halo block).
template <class T, class Cfg, bool kDet, BwdCap kCapPath, bool kBand = false, class Tile, bool kTail = false>
__device__ __forceinline__ void bwd_consume(BwdSmem<Cfg>& sm, const BwdParams& p, const Tile& t, int wg,
                                            PipeState<Cfg::kStages>& ps, PipeState<BwdSmem<Cfg>::kDqBufs>& dq_ps,
                                            int kv_phase, const BwdBandJobs& jobs = BwdBandJobs{},
                                            bool store_dkdv = true) {
  constexpr int D = Cfg::kHeadDim, kN = Cfg::kSdpCols, kSteps = kN / 16;  // S^T / dP^T columns, as k-steps
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4;
  const int key_row = t.n0 + wg * Cfg::kWgKeyStride + warp_in_wg * 16 + lane / 4;  // this thread's keys: + 0 and + 8
  const int q_col0 = wg * Cfg::kWgQStride;  // this warpgroup's first q row of the block (its first S^T column)
  static_assert(Cfg::kDvColsMax <= Cfg::kDkvColsMax);
  float dk[Cfg::kDkvColsMax / 2], dv[Cfg::kDvColsMax / 2];  // dV: its own share (d_v: kDvCols*)
#pragma unroll
  for (int i = 0; i < Cfg::kDkvColsMax / 2; ++i) {
    dk[i] = 0.f;
    if (i < Cfg::kDvColsMax / 2) dv[i] = 0.f;
  }

  // Without the softcap path every tile takes FA3's order (BwdConfig::kPackAfterDs says why not with it).
  constexpr bool kPackAfterDs = Cfg::kPackAfterDs || kCapPath == BwdCap::Off;
  const int steps = t.steps(p.attn.q_per_kv);
  // Additive bias (Cfg::kBias, bias.cuh): the step's bias lines prefetched a step ahead (the first step's ahead
  // of the K / V wait), loaded into S^T's accumulator at the step's start; `bias_at` gives the spot of step (h, m).
  auto bias_at = [&](int h, int m) {
    return bwd_bias_spot(p, t.batch, h, m * Cfg::kBlockM + q_col0 + 2 * quad_col, key_row, t.seq.len_q, t.seq.len_k);
  };
  // The staged seed (bias.cuh, bwd_bias_stage): BF16 / F16 kernel, 64-q-row keys-major dS^T tile. A warp's slot for
  // the step of stage st: its own 16 rows of dS^T buffer st.
  constexpr bool kBiasStageable = Cfg::kBias && !Cfg::kBiasF32 && kN == 64 && Cfg::kBlockM == 64 && !Cfg::kDsQMajor &&
                                  !Cfg::kSplitD;
  // Its copies for a step are issued ahead of it (a tile's first step before the K / V wait, the others at the step
  // before's after_dq), where it is whole for the warp; the other steps' lines are prefetched there instead.
  // The seed takes the same rows as 16 (warp - 4) from threadIdx (wg = warp / 4 - 1): with this form there too,
  // ptxas held a register over the step and spilled 4 B; with that form in both places, 8 B.
  auto bias_slot = [&](int stage) {
    return smem_addr(sm.ds[stage]) + (wg * Cfg::kWgKeyStride + warp_in_wg * 16) * kAtomRowBytes;
  };
  auto bias_slot_at_seed = [&](int stage) {
    static_assert(!kBiasStageable || Cfg::kWgKeyStride == 64, "the slot: warp w's 16 rows of dS^T");
    return smem_addr(sm.ds[stage]) + (threadIdx.x / 32 - 4) * 16 * kAtomRowBytes;
  };
  auto bias_ahead = [&](int stage, int hn, int mn) {
    if constexpr (Cfg::kBias && !Cfg::kBiasAlibi) {  // (ALiBi: computed at the seed, nothing to fetch)
      const BwdBiasSpot spot = bias_at(hn, mn);
      if constexpr (kBiasStageable) {
        if ((p.bias.lean & cuda_backend::kBwdBiasStaged) && bwd_bias_warp_whole<kN>(spot)) {
          bwd_bias_stage<kN>(p, spot, bias_slot(stage));
          return;
        }
      }
      bwd_bias_prefetch<kN, Cfg::kBiasF32>(p, spot);
    }
  };
  if constexpr (Cfg::kBias) {
    if (steps > 0) {
      int h0, m0;
      t.first_step(p, h0, m0);
      bias_ahead(ps.stage(), h0, m0);
    }
  }
  if (steps > 0) mbar_wait(&sm.kv_full, kv_phase);
  if (kBwdStamps && threadIdx.x == 128 && kv_phase == 0) bwd_stamp(kBsKvLanded);
  // Past seqused_k in the sequence's last key block: its K / V rows zeroed before any MMA or ldmatrix reads them.
  if (steps > 0 && p.attn.seqused_k != nullptr && t.n0 + Cfg::kBlockN > t.seq.len_k)
    bwd_zero_rows<Cfg::kBlockN, Cfg::kAtoms, Cfg::kAtomsV>(sm.k, sm.v, Cfg::kKAtomBytes, t.seq.len_k - t.n0);
  const uint32_t k_lo = desc_k_major_lo(sm.k + wg * Cfg::kWgKeyStride * kAtomRowBytes);
  const uint32_t v_lo = desc_k_major_lo(sm.v + wg * Cfg::kWgKeyStride * kAtomRowBytes);
  // K in registers (bwd_k_reg_steps): this warp's 16 keys as S^T's A fragments for the first kKRegs
  // k-steps, loaded once a tile. Not in the band's kernel (it spilled there).
  constexpr int kKRegs = kBand ? 0 : bwd_k_reg_steps<Cfg, kDet, kCapPath>();
  [[maybe_unused]] uint32_t kf[kKRegs > 0 ? kKRegs : 1][4];
  if constexpr (kKRegs > 0) {
    static_assert(!Cfg::kSplitD, "K in registers: a warpgroup's own 64 keys (d <= 128)");
    // Matrix mtx = lane / 8 of k-step kk: keys + 8 (mtx % 2), head-dim columns 16 kk + 8 (mtx / 2) .. + 7,
    // i.e. the A fragment's registers in order (rows g, g + 8) x (columns 2 (l % 4), + 8); lane % 8 names
    // the key row, whose 16-byte chunk c sits at c ^ (row % 8) in its atom (TMA's 128-byte swizzle).
    const int mtx = lane / 8;
    const uint32_t row = smem_addr(sm.k) +
                         (wg * Cfg::kWgKeyStride + warp_in_wg * 16 + (mtx & 1) * 8 + lane % 8) * kAtomRowBytes;
    if (steps > 0) {  // else K is not waited for (nor used)
#pragma unroll
      for (int kk = 0; kk < kKRegs; ++kk)
        ldmatrix_x4(row + (kk / 4) * Cfg::kKAtomBytes + ((((kk % 4) * 2 + (mtx >> 1)) ^ (lane % 8)) * 16), kf[kk]);
    }
  }
  // BwdConfig::kDvBeforeDq: dV is waited for before dQ is issued (bwd_dq), in the default mode's kernel with K
  // in registers only.
  constexpr bool kDvFirst = Cfg::kDvBeforeDq && kKRegs > 0 && !kDet && kCapPath == BwdCap::Off;
  // The dS^T buffer alternates with the steps, as the 2-stage ring does: its index is the stage.
  static_assert(Cfg::kStages == 2, "dS^T double buffer indexed by the ring stage");
  // The bias kernels' staged seed reuses dS^T rows of the next stage (bias.cuh, bwd_bias_stage) and is issued at
  // bwd_dq's after_dq hook, which the band's dQ path does not have.
  static_assert(!(kBand && Cfg::kBias), "no band kernel with a bias");
  int h, m;
  t.first_step(p, h, m);
  for (int i = steps; i > 0; --i, ps.advance(), dq_ps.advance(), t.next_step(p, h, m)) {
    const int s = ps.stage();
    // Element bitmask (Cfg::kBitmask): this thread's keep words of the step's partial block, its two key rows
    // (bwd/bit_lists.h: key row r's word of quad thread t at r * 4 + t), loaded ahead of the Q wait and the
    // S^T MMA so that their latency hides there; all ones where the block needs none.
    [[maybe_unused]] uint32_t key_bits[2];
    if constexpr (Cfg::kBitmask) {
      key_bits[0] = key_bits[1] = ~0u;
      if (t.q_blocks.needs_bits(m)) {
        const uint32_t* w = bwd_bit_slot(p.q_list_headers, t.q_blocks.line + t.q_block(m)) + (key_row - t.n0) * 4 + quad_col;
        key_bits[0] = __ldg(w);
        key_bits[1] = __ldg(w + 32);
      }
    }
    mbar_wait(&sm.q_full[s], ps.phase());
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp_step(kBsQLanded, steps - i);
    // Past seqused_q in the last q-block: its Q / dO rows zeroed (zero_rows.cuh), here or, in d 64's
    // deterministic and bitmask kernels (their registers spilled 4-36 bytes: notes, session 45), before
    // q_full by the hand-over warp (bwd_hand_over_q).
    if (!bwd_q_handed_over<Cfg, kDet>() && p.attn.seqused_q != nullptr) {
      const int q0 = (Tile::kList ? t.q_block(m) : m) * Cfg::kBlockM;
      if (q0 + Cfg::kBlockM > t.seq.len_q)
        bwd_zero_rows<Cfg::kBlockM, Cfg::kAtoms, Cfg::kAtomsV>(sm.q[s], sm.dout[s], Cfg::kQAtomBytes, t.seq.len_q - q0);
    }
    // Three groups in flight at most: S^T, dP^T; dV behind dP^T; then dK, dQ (d 128: dQ, dK).
    float st[kN / 2], dpt[kN / 2];  // S^T and dP^T: 64 keys x kN q rows
    // The bias kernel: S^T accumulates onto the bias over the scale (bias.cuh), from its first k-step on.
    constexpr bool kSeeded = Cfg::kBias;
    if constexpr (kSeeded) {
      if constexpr (Cfg::kBiasAlibi) {
        bwd_alibi_seed<kN>(st, p, bias_at(h, m));
      } else if constexpr (Cfg::kBiasF32) {
        bwd_bias_seed_f32<kN>(st, p, bias_at(h, m));
      } else {
        // staged ahead (bias_ahead) where the warp's block is whole
        bool staged = false;
        if constexpr (kBiasStageable)
          staged = (p.bias.lean & cuda_backend::kBwdBiasStaged) && bwd_bias_warp_whole<kN>(bias_at(h, m));
        bwd_bias_seed16<kN>(st, p, bias_at(h, m), staged, kBiasStageable ? bias_slot_at_seed(s) : 0u);
      }
    }
    {
      const uint32_t q_lo = desc_k_major_lo(sm.q[s] + q_col0 * kAtomRowBytes);
      const uint32_t do_lo = desc_k_major_lo(sm.dout[s] + q_col0 * kAtomRowBytes);
      wgmma_fence();
      if constexpr (kKRegs > 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          if (kk < kKRegs)  // K from registers, Q K-major as B (the `_kb` form)
            WgmmaRS<T, kN, Major::K>::run(st, kf[kk], desc_k_major_add(q_lo, Cfg::kQAtomBytes, kk), kSeeded || kk > 0);
          else
            WgmmaSS<T, kN>::run(st, desc_k_major_add(k_lo, Cfg::kKAtomBytes, kk),
                                desc_k_major_add(q_lo, Cfg::kQAtomBytes, kk), kSeeded || kk > 0);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          WgmmaSS<T, kN>::run(st, desc_k_major_add(k_lo, Cfg::kKAtomBytes, kk),
                              desc_k_major_add(q_lo, Cfg::kQAtomBytes, kk), kSeeded || kk > 0);
      }
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < Cfg::kHeadDimV / 16; ++kk)  // over d_v
        WgmmaSS<T, kN>::run(dpt, desc_k_major_add(v_lo, Cfg::kKAtomBytes, kk),
                            desc_k_major_add(do_lo, Cfg::kQAtomBytes, kk), kk > 0);
      wgmma_commit();
    }
    // Partial q-blocks: masked scores to -inf by keep-bits (R2P + FSEL, as the forward), so that
    // P = exp2(-inf) = 0 with no per-element test after the exp.
    auto mask_scores = [&] {
      if (t.q_blocks.full(m)) return;
      int m0;
      if constexpr (Tile::kList)
        m0 = t.q_block(m) * Cfg::kBlockM + q_col0;
      else
        m0 = m * Cfg::kBlockM + q_col0;
      if constexpr (Cfg::kBitmask) {  // the window's keep bits AND the caller's
        cuda_backend::KeepBits<kN> k0 =
            cuda_backend::keep_bits<kN>(t.mask.row_lo(key_row) - m0, t.mask.row_hi(key_row) - m0, quad_col);
        cuda_backend::KeepBits<kN> k1 =
            cuda_backend::keep_bits<kN>(t.mask.row_lo(key_row + 8) - m0, t.mask.row_hi(key_row + 8) - m0, quad_col);
        static_assert(cuda_backend::KeepBits<kN>::kWords == 1, "bitmask: a key row's q columns in one word");
        k0.w[0] &= key_bits[0];
        k1.w[0] &= key_bits[1];
        cuda_backend::apply_keep_bits<kN, 0>(st, k0);
        cuda_backend::apply_keep_bits<kN, 1>(st, k1);
      } else {
        cuda_backend::apply_keep_bits<kN, 0>(
            st, cuda_backend::keep_bits<kN>(t.mask.row_lo(key_row) - m0, t.mask.row_hi(key_row) - m0, quad_col));
        cuda_backend::apply_keep_bits<kN, 1>(
            st, cuda_backend::keep_bits<kN>(t.mask.row_lo(key_row + 8) - m0, t.mask.row_hi(key_row + 8) - m0, quad_col));
      }
    };
    // P^T = exp2(S^T scale log2e - lse) (softcap: of the capped score, which st then keeps in log2
    // units for the derivative; P is recomputed from it below), as A fragments for dV += P^T dO
    // (kPackAfterDs: P^T stays fp32 in st, and is packed with dS^T, below).
    wgmma_wait<1>();
    fence_operands(st);
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp_step(kBsSDone, steps - i);
    uint32_t pf[kSteps][4], dsf[kSteps][4];  // P^T and dS^T as A fragments: k-steps of 16 q rows
    // lse and D of this thread's column pair (8 j + 2 quad_col, + 1), j = 2 kk + r / 2
    // (kStatsByQuad: the k-step's four values in one 16-byte load; the loads of r and r ^ 1 are one).
    constexpr int kStatBytes = Cfg::kStatsByQuad ? 16 : 8;
    const uint32_t lse_addr = smem_addr(sm.lse[s] + q_col0) + kStatBytes * quad_col;
    const uint32_t dpsum_addr = smem_addr(sm.dpsum[s] + q_col0) + kStatBytes * quad_col;
    auto stat_pair = [](uint32_t addr, int kk, int r) {
      if constexpr (Cfg::kStatsByQuad) {
        const float4 v = lds_f32x4(addr + 64 * kk);
        return r / 2 ? make_float2(v.z, v.w) : make_float2(v.x, v.y);
      } else {
        return lds_f32x2(addr + 32 * (2 * kk + r / 2));
      }
    };
    const float scale_log2 = p.attn.scale_log2;
    // Element 8 kk + 2 r + e of the accumulators (= 4 j + 2 h + e, column group j = 2 kk + r / 2,
    // row half h = r % 2) is key row + 8 h, q column 8 j + 2 quad_col + e.
    // P^T of the k-steps [kk0, kk1) (std::integral_constant bounds).
    auto exp_steps = [&](auto softcap, auto kk0, auto kk1) {
      constexpr bool kCap = decltype(softcap)::value;
#pragma unroll
      for (int kk = decltype(kk0)::value; kk < decltype(kk1)::value; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float2 lse = stat_pair(lse_addr, kk, r);
          float pv[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = st[8 * kk + 2 * r + e];
            pv[e] = cuda_backend::fast_exp2((kCap ? x : x * scale_log2) - (e ? lse.y : lse.x));
            if constexpr (!kCap) x = pv[e];
          }
          if constexpr (!kPackAfterDs) pf[kk][r] = cuda_backend::pack2<T>(pv[0], pv[1]);
        }
    };
    // In FA3's order (kPackAfterDs) in a kernel built without the softcap path (the default mode's
    // at d 64, d 128 64 and 80 rows, the deterministic mode's at d 128), the first
    // Cfg::kExpAheadSteps k-steps' exp2 are written into both arms of the mask's branch: in one
    // basic block with the dP^T wait ptxas sinks every MUFU behind that wait (into dS's math); the
    // block boundary keeps these ahead of it, in dP^T's MMA shadow, as FA3's schedule has part of them.
    constexpr int kExpAhead = kPackAfterDs && kCapPath == BwdCap::Off ? Cfg::kExpAheadSteps : 0;
    static_assert(kExpAhead <= kSteps, "kExpAheadSteps: at most the step's k-steps");
    using ExpAhead = std::integral_constant<int, kExpAhead>;
    auto p_phase = [&](auto softcap) {
      constexpr bool kCap = decltype(softcap)::value;
      if constexpr (kCap) {
#pragma unroll
        for (int i = 0; i < kN / 2; ++i)
          st[i] = cuda_backend::softcap_score(st[i], p.attn.softcap, p.attn.softcap_in) * scale_log2;
      }
      if constexpr (kCap && kPackAfterDs) {  // P is computed with dS^T, from the capped score
        mask_scores();
      } else if constexpr (kExpAhead > 0) {
        if (t.q_blocks.full(m)) {
          exp_steps(softcap, std::integral_constant<int, 0>{}, ExpAhead{});
        } else {
          mask_scores();
          exp_steps(softcap, std::integral_constant<int, 0>{}, ExpAhead{});
        }
        exp_steps(softcap, ExpAhead{}, std::integral_constant<int, kSteps>{});
      } else {
        mask_scores();
        exp_steps(softcap, std::integral_constant<int, 0>{}, std::integral_constant<int, kSteps>{});
      }
    };
    // A fragments (P^T or dS^T) into a keys x kBlockM q rows tile in the 128-byte-swizzled layout
    // (64 q rows per atom; chunk c of row r at c ^ (r % 8)), by stmatrix: per instruction the
    // 8 x 8 blocks (rows + 0, + 8) x (column groups g, g + 1); made visible to wgmma, which reads
    // through the async proxy, by a fence after it (fence_smem_for_tma).
    auto store_tile_t = [&](uint8_t* tile, const uint32_t(&frag)[kSteps][4]) {
      const int blk = lane / 8, r = warp_in_wg * 16 + (blk & 1) * 8 + lane % 8;
      const uint32_t row_base = smem_addr(tile) + (wg * Cfg::kWgKeyStride + r) * kAtomRowBytes;
      const uint32_t chunk_xor = ((blk >> 1) ^ (lane % 8)) * 16;
#pragma unroll
      for (int j = 0; j < kN / 8; j += 2) {
        // Column group j of 8 q rows, 8 to an atom (kBlockM 64: q_col0 + kN <= 64, one atom).
        const uint32_t at = Cfg::kBlockM == 64 ? (((q_col0 / 8 + j) * 16) ^ chunk_xor)
                                               : (j / 8) * (Cfg::kBlockN * kAtomRowBytes) + (((j % 8) * 16) ^ chunk_xor);
        stmatrix_x4(row_base + at, frag[j / 2][0], frag[j / 2][1], frag[j / 2][2], frag[j / 2][3]);
      }
    };
    // Cfg::kDsQMajor: dS as a q rows x keys tile (keys contiguous, 64 to an atom of kBlockM rows,
    // the same swizzle), each warpgroup's 64 keys its own atom, by stmatrix.trans: the 8 x 8 block
    // (keys 16 warp + 8 (mtx % 2) .., q rows 16 kk + 8 (mtx / 2) ..) of matrix mtx = lane / 8 goes to
    // those q rows' 16-byte key chunk 2 warp + mtx % 2, lane % 8 naming the row.
    auto store_tile_q = [&](uint8_t* tile, const uint32_t(&frag)[kSteps][4]) {
      const int mtx = lane / 8;
      const uint32_t at = smem_addr(tile) + wg * Cfg::kQAtomBytes + (8 * (mtx >> 1) + lane % 8) * kAtomRowBytes +
                          (((2 * warp_in_wg + (mtx & 1)) ^ (lane % 8)) * 16);
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk)
        stmatrix_x4_trans(at + 16 * kk * kAtomRowBytes, frag[kk][0], frag[kk][1], frag[kk][2], frag[kk][3]);
    };
    auto store_ds = [&](uint8_t* tile, const uint32_t(&frag)[kSteps][4]) {
      if constexpr (Cfg::kDsQMajor)
        store_tile_q(tile, frag);
      else
        store_tile_t(tile, frag);
    };
    with_softcap_path<kCapPath>(p, p_phase);
    if constexpr (Cfg::kSplitD) {  // dV += P^T dO once both halves of P^T are stored
      store_tile_t(sm.pt[s], pf);
      fence_smem_for_tma();
      named_bar_sync(kBwdDsBar, 256);
      mma_dv_split_wg<T, Cfg>(dv, sm.pt[s], sm.dout[s], wg);
    } else if constexpr (!kPackAfterDs) {
      mma_dv_rs<T, Cfg>(dv, pf, sm.dout[s]);
    }
    // dS^T = P^T (dP^T - D) (softcap: times 1 - tanh^2), as A fragments for dK += dS^T Q
    // (kPackAfterDs: P^T packed here too; only dP^T was still in flight).
    wgmma_wait<kPackAfterDs ? 0 : 1>();
    fence_operands(dpt);
    static_assert(!Cfg::kBias || kCapPath == BwdCap::Off, "bias: no softcap path (the bias is seeded before the scale)");
    auto ds_phase = [&](auto softcap) {
      constexpr bool kCap = decltype(softcap)::value;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float2 dps = stat_pair(dpsum_addr, kk, r);
          float2 lse;
          if constexpr (kCap) lse = stat_pair(lse_addr, kk, r);
          float ds[2], pvs[2];
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
            pvs[e] = pv;  // packed as P^T here where kPackAfterDs
          }
          dsf[kk][r] = cuda_backend::pack2<T>(ds[0], ds[1]);
          if constexpr (kPackAfterDs) pf[kk][r] = cuda_backend::pack2<T>(pvs[0], pvs[1]);
        }
    };
    with_softcap_path<kCapPath>(p, ds_phase);
    // dS^T into the step's buffer (read by dQ = dS K, and at d > 128 by dK); both warpgroups meet.
    // d 96: dK (from the dS^T registers) is issued before the meeting; d 64 / 128 behind dQ
    // (dq.cuh). kPackAfterDs: dS^T stored before dV is issued (FA3's order: the meeting comes
    // sooner), the fence behind dV's issue.
    if constexpr (kPackAfterDs) {
      store_ds(sm.ds[s], dsf);
      mma_dv_rs<T, Cfg>(dv, pf, sm.dout[s]);
    }
    // dbias += dS^T from its packed fragments (bias.cuh), once S^T and dP^T are dead (ALiBi has none).
    if constexpr (Cfg::kBias && !Cfg::kBiasAlibi) {
      static_assert(kPackAfterDs, "bias: dS^T's fragments are final once stored");
      if (p.bias.grad != nullptr) {
        // (the F32-bias kernel keeps the scalar adds: with the pairs there the fp16 unit's kernel spilled 4 B)
        if (!Cfg::kBiasF32 && (p.bias.lean & cuda_backend::kBwdBiasGradPairs))
          bwd_dbias_add_pairs<T, kN>(p, bias_at(h, m), dsf);
        else
          bwd_dbias_add<T, kN>(p, bias_at(h, m), dsf);
      }
    }
    if constexpr (!Cfg::kSplitD && !Cfg::kDqBeforeDk) {
      const uint32_t q_lo = desc_n_major_lo(sm.q[s], Cfg::kQAtomBytes);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Cfg::kBlockM / 16; ++kk) WgmmaRS<T, D>::run(dk, dsf[kk], desc_n_major_add(q_lo, kk), 1);
      wgmma_commit();
    }
    if constexpr (!kPackAfterDs) store_ds(sm.ds[s], dsf);
    fence_smem_for_tma();
    named_bar_sync(kBwdDsBar, 256);
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp_step(kBsDsMet, steps - i);
    if constexpr (Cfg::kDqOwnAtoms) {  // dQ ahead of dK (dq.cuh)
      bwd_dq_own_atoms<T, Cfg>(sm, wg, s, dv, dk, [&] { mma_dk_split_wg<T, Cfg>(dk, sm.ds[s], sm.q[s], wg); });
    } else {
      if constexpr (Cfg::kSplitD) mma_dk_split_wg<T, Cfg>(dk, sm.ds[s], sm.q[s], wg);
      if constexpr (kBand) {  // equal shares (64 + 64), one code path (mma_dkv_split_wg says why)
        static_assert(Cfg::kDqCols0 == Cfg::kDqCols1);
        bwd_dq_band<T, Cfg, Cfg::kDqCols0>(sm, p, t, wg * Cfg::kDqCols0, s, h, m, jobs, dv, dk, pf, dsf);
      } else if constexpr (Cfg::kBias) {
        // The next step's bias lines prefetched once dQ has left the registers (bwd_dq's after_dq), with dK
        // still in flight (d 64 / 128): loads there held registers over the step's end and spilled.
        static_assert(!Cfg::kDqSwapAB && !Cfg::kSplitD);
        auto load_next_bias = [&] {
          if (i > 1) {
            int hn = h, mn = m;
            t.next_step(p, hn, mn);
            bias_ahead(s ^ 1, hn, mn);  // the next step's stage
          }
        };
        if (wg == 0)
          bwd_dq<T, Cfg, Cfg::kDqCols0, kDet, kDvFirst>(sm, p, t, 0, 0, s, h, m, dv, dk, pf, dsf, dq_ps, load_next_bias);
        else
          bwd_dq<T, Cfg, Cfg::kDqCols1, kDet, kDvFirst>(sm, p, t, Cfg::kDqRowSplit ? 0 : Cfg::kDqCols0, 1, s, h, m,
                                                        dv, dk, pf, dsf, dq_ps, load_next_bias);
      } else if constexpr (Cfg::kDqSwapAB)  // equal shares, one code path (mma_dkv_split_wg says why)
        bwd_dq<T, Cfg, Cfg::kDqCols0, kDet, kDvFirst>(sm, p, t, 0, wg, s, h, m, dv, dk, pf, dsf, dq_ps);
      else if (wg == 0)
        bwd_dq<T, Cfg, Cfg::kDqCols0, kDet, kDvFirst>(sm, p, t, 0, 0, s, h, m, dv, dk, pf, dsf, dq_ps);
      else
        bwd_dq<T, Cfg, Cfg::kDqCols1, kDet, kDvFirst>(sm, p, t, Cfg::kDqRowSplit ? 0 : Cfg::kDqCols0, 1, s, h, m,
                                                      dv, dk, pf, dsf, dq_ps);
    }
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp_step(kBsStepEnd, steps - i);
  }
  if (kBwdStamps && threadIdx.x == 128) bwd_stamp(kBsLastStep);
  if constexpr (!Cfg::kSplitD) {
    // Both warpgroups past their last MMA (each ends its step with a full wgmma wait): K and V are free.
    named_bar_sync(kBwdDsBar, 256);
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp(kBsEpiMet);
    // kv_phase 1: the second of paired key blocks (tid_x_fresh says why; the band: every key block).
    if constexpr (kBand) {
      // The K / V tiles are free once staged dK / dV are read back: this warp's kv_empty arrival (the
      // next key block's load waits for all eight).
      if (store_dkdv) store_dk_dv_staged<T, D>(p, t, sm.k, sm.v, wg, tid_x_fresh(), dk, dv);
      fence_smem_for_tma();
      __syncwarp();
      if (lane == 0) mbar_arrive(&sm.kv_empty);
    } else {
      // A piece of a split tile (wave_tail.h): its partial to the workspace; only the tile's last piece stores.
      if constexpr (kTail) {
        static_assert(Cfg::kDkvColsMax / 4 == bwd_tail_run_chunks<Cfg>(), "a piece's run as the host sized it");
        if (p.tail_pieces > 1 && !bwd_tail_gather(smem_addr(&sm.item), p, dk, dv)) return;
      }
      store_dk_dv_staged<T, D>(p, t, sm.k, sm.v, wg, kv_phase == 0 ? threadIdx.x : tid_x_fresh(), dk, dv);
    }
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp(kBsDkvStored);
  } else if constexpr (Cfg::kHeadDimV != D) {  // dK's and dV's shares differ (kDvCols*)
    if (wg == 0)
      store_dk_dv_apart<T, Cfg::kDkvCols0, Cfg::kDvCols0>(p, t, key_row, quad_col, 0, 0, dk, dv);
    else
      store_dk_dv_apart<T, Cfg::kDkvCols1, Cfg::kDvCols1>(p, t, key_row, quad_col, Cfg::kDkvCols0, Cfg::kDvCols0, dk, dv);
  } else if (Cfg::kDkvCols0 == Cfg::kDkvCols1 || wg == 0) store_dk_dv<T, Cfg::kDkvCols0>(p, t, key_row, quad_col, wg * Cfg::kDkvCols0, dk, dv);
  else store_dk_dv<T, Cfg::kDkvCols1>(p, t, key_row, quad_col, Cfg::kDkvCols0, dk, dv);
}

// The kernels that cut the full mask's wave tail (wave_tail.h; launch.cuh's rule): the default mode's
// accumulator path with dK / dV in registers over the whole head dim (d <= 128), no block list, no bias, and
// a full mask can reach: not d 128's 64-row kernel without softcap (bwd_rows80 sends a full mask to the 80-row
// tile), which keeps its code as it was (the gather cost the causal kernel 1.2 %, session 48).
template <class Cfg, bool kDet, bool kRing, bool kSoftcap>
constexpr bool bwd_tail_kernel() {
  return !kDet && !kRing && !Cfg::kSplitD && !Cfg::kDqInStage && !Cfg::kBlockList && !Cfg::kBias && !Cfg::kKeys80 &&
         (kSoftcap || Cfg::kHeadDim != 128 || Cfg::kBlockM != 64);
}

// kDet: deterministic mode (BwdParams::deterministic), a kernel of its own so that the default
// mode's consumer loop is compiled without the staging path. kRing: the default mode's dQ ring
// (BwdParams::dq_ring_slots, dq_ring.h), a kernel of its own too: CTAs take their item by ticket
// and warps 1-3 write dQ through the ring (dq.cuh, bwd_ring_lead); the consumers are the same.
// kSoftcap: the softcap kernel (default or deterministic mode) where the config builds one
// (kSoftcapKernel; then the kernel with kSoftcap false has no softcap path).
template <class T, class Cfg, bool kDet, bool kRing = false, bool kSoftcap = false>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    bwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tdo,
               const __grid_constant__ BwdParams p) {
  constexpr bool kCapSplit = Cfg::kSoftcapKernel && !kRing && (!kDet || Cfg::kDetSoftcapKernel);
  static_assert(!kSoftcap || kCapSplit, "a softcap kernel of its own: where the config builds one, not the ring's");
  constexpr BwdCap kCapPath = kCapSplit ? (kSoftcap ? BwdCap::On : BwdCap::Off)
                        : Cfg::kHasSoftcap ? BwdCap::Runtime : BwdCap::Off;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uintptr_t base = reinterpret_cast<uintptr_t>(smem_raw);
  auto& sm = *reinterpret_cast<BwdSmem<Cfg>*>(kBwdSmemSlack<Cfg> > 0 ? (base + 1023) & ~uintptr_t(1023) : base);
  if constexpr (kBwdSmemSlack<Cfg> == 0) {
    if (smem_addr(smem_raw) % 1024 != 0) __trap();  // no slack to realign: a misplaced base must not go unnoticed
  }
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    if (kBwdStamps) bwd_stamp(kBsStart);
    prefetch_tma_maps(&tq, &tk, &tv, &tdo);
    mbar_init(&sm.kv_full, 1);
    mbar_init(&sm.kv_empty, 8);  // paired key blocks: one arrival per consumer warp (K / V free again)
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.q_full[s], 1);
      if constexpr (bwd_q_handed_over<Cfg, kDet>()) mbar_init(&sm.q_landed[s], 1);
      // One arrival per consumer warp; d > 128: the dQ writer's, once its adds have read the stage.
      mbar_init(&sm.q_empty[s], Cfg::kDqInStage ? 1 : 8);
      if constexpr (Cfg::kDqInStage) {
        mbar_init(&sm.dq_full[2 * s], 8);  // one arrival per consumer warp and half
        mbar_init(&sm.dq_full[2 * s + 1], 8);
      }
    }
#pragma unroll
    for (int b = 0; b < BwdSmem<Cfg>::kDqBufs; ++b) {
      if constexpr (!Cfg::kDqInStage) mbar_init(&sm.dq_full[b], 8);  // one arrival per consumer warp
      mbar_init(&sm.dq_empty[b], 1);
    }
    if constexpr (kRing) mbar_init(&sm.ring_full, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    if (kBwdStamps) bwd_stamp(kBsBarInit);
    // Launched early behind the preprocess (launch.cuh): from here on its writes (lse, D, the dQ
    // accumulator's clear, the ring, the ticket) are visible to every thread, each of which reads
    // global memory only after the barrier below.
    cuda_backend::grid_dependency_wait();
    if (kBwdStamps) bwd_stamp(kBsDepWait);
    // Deterministic mode and the dQ ring: the work item is the CTA's start order, so a CTA waits
    // (bwd_write_dq, bwd_ring_lead) only on CTAs that started before it, never on one that may not
    // be resident yet.
    sm.item = kDet || kRing ? atomicAdd(p.tile_ticket, 1) : int(blockIdx.x);
    if (kBwdStamps) bwd_stamp(kBsTicket);
  }
  __syncthreads();
  if (kBwdStamps && threadIdx.x == 0) bwd_stamp(kBsSynced);
  cuda_backend::grid_dependents_launch();  // the postprocess may be scheduled (it waits for this grid's end)
  int item;  // by its shared address: a generic load here cost d 128 a spill
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(item) : "r"(smem_addr(&sm.item)));
  // Paired key blocks (d 128 default mode, BwdParams::kv_pair): two tiles, key blocks j and N - 1 - j
  // of the sequence (lpt_order.h), the second walked upwards; each role works on both in turn, the
  // second's calls inlined apart from the first's, its tile derived from the first's (the producer
  // warpgroup's 24 registers hold no loop state) or rebuilt from the item (the consumers' registers
  // hold none over the first tile's steps).
  constexpr bool kPairable = Cfg::kPairKeyBlocks && !kDet && !kRing && !Cfg::kDqInStage && !Cfg::kSplitD;
  constexpr bool kTail = bwd_tail_kernel<Cfg, kDet, kRing, kSoftcap>();
  using Tile = BwdTileFor<Cfg>;
  Tile t;
  if (kPairable && p.kv_pair) {
    int tiles;
    t = make_bwd_pair_tile<Cfg::kBlockN, Cfg::kBlockM, Tile>(p, item, tiles);
    if (tiles == 0) return;  // past the sequence's pairs
  } else {
    if (p.lpt_section > 0) item = bwd_lpt_item(item, p.attn.heads_kv * p.attn.batch, p.n_blocks, p.lpt_section);
    if constexpr (Cfg::kBias) {
      if (p.bias.batch_inner)  // longest-first sections: the sections' units recounted; else block order's
        item = p.lpt_section > 0 ? bwd_lpt_batch_inner_item(item, p.n_blocks, p.attn.batch, p.attn.heads_kv)
                                 : bwd_bias_batch_inner_item(item, p.attn.batch, p.n_blocks, p.attn.heads_kv);
    }
    if constexpr (kTail)  // the full mask's wave tail: the last tiles' items are pieces
      t = make_bwd_tail_tile<Cfg::kBlockN, Cfg::kBlockM, Tile>(p, item);
    else
      t = make_bwd_tile<Cfg::kBlockN, Cfg::kBlockM, Tile>(p, item);
    t.walk = !kDet && p.q_walk_down ? kBwdWalkDown : kBwdWalkUp;  // deterministic: up (dq_last_block's slack)
    if constexpr (kRing) t.walk = kBwdRingWalk;
    if (t.n0 >= t.seq.rows_k || t.n_block >= p.n_blocks) return;  // past the keys: nothing to load or store
  }
  const bool pairs = kPairable && p.kv_pair;  // then the second tile is there if its block is above the first's
  if (kBwdStamps && threadIdx.x == 0) {
    bwd_stamp(kBsTile);
    bwd_stamp_word(kBwItem, unsigned(item));
    bwd_stamp_word(kBwSteps, unsigned(t.steps(p.attn.q_per_kv)));
  }
  auto second = [&](const Tile& first) { return bwd_pair_second<Cfg::kBlockN, Cfg::kBlockM>(p, first); };

  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) {
      if (kBwdStamps) bwd_stamp(kBsRegsGiven);
      PipeState<Cfg::kStages> ps;
      uint64_t* q_land = sm.q_full;
      if constexpr (bwd_q_handed_over<Cfg, kDet>())
        if (p.attn.seqused_q != nullptr) q_land = sm.q_landed;
      if (t.steps(p.attn.q_per_kv) > 0) bwd_produce<Cfg, false>(sm, p, t, &tq, &tk, &tv, &tdo, ps, q_land);
      if (pairs) {
        const Tile u = second(t);
        if (u.n_block > t.n_block && u.steps(p.attn.q_per_kv) > 0)
          bwd_produce<Cfg, true>(sm, p, u, &tq, &tk, &tv, &tdo, ps, q_land);
      }
      if (kBwdStamps) bwd_stamp(kBsProdEnd);
    }
    if constexpr (bwd_q_handed_over<Cfg, kDet>()) {  // warp 3: idle otherwise in these kernels
      static_assert(!kRing && !Cfg::kPairKeyBlocks && Cfg::kDetWriters == 1, "warp 3 free, one tile a CTA");
      if (warp == 3 && t.steps(p.attn.q_per_kv) > 0 && p.attn.seqused_q != nullptr) bwd_hand_over_q<Cfg>(sm, p, t);
    }
    if constexpr (Cfg::kDqInStage) {
      if (threadIdx.x == 32 && t.steps(p.attn.q_per_kv) > 0) bwd_write_dq_in_stage<Cfg, kDet>(sm, p, t);
    } else if constexpr (kRing) {
      static_assert(Cfg::kHasRingKernel && !kDet);
      if (warp == 1 && t.steps(p.attn.q_per_kv) > 0) bwd_ring_lead<Cfg>(sm, p, t);
      if (kBwdStamps && threadIdx.x == 32) bwd_stamp(kBsWriterEnd);
      if (warp >= 2 && t.steps(p.attn.q_per_kv) > 0) bwd_ring_store<T, Cfg>(sm, p, t, int(threadIdx.x) - 64);
    } else if constexpr (kDet || !Cfg::kDqByAtomics) {  // else the consumers add themselves
      constexpr int kWriters = kDet ? Cfg::kDetWriters : 1;  // lane 0 of warp 1 (and of warp 2)
      static_assert(kWriters <= 2);
      if (threadIdx.x == 32 || (kWriters > 1 && threadIdx.x == 64)) {
        PipeState<BwdSmem<Cfg>::kDqBufs> ps;
        if (t.steps(p.attn.q_per_kv) > 0)
          bwd_write_dq<Cfg, kDet, kWriters>(sm, p, t, kWriters > 1 && threadIdx.x == 64, ps);
        if (pairs) {
          const Tile u = second(t);
          if (u.n_block > t.n_block && u.steps(p.attn.q_per_kv) > 0) bwd_write_dq<Cfg, kDet, kWriters>(sm, p, u, 0, ps);
        }
        if (kBwdStamps && threadIdx.x == 32) bwd_stamp(kBsWriterEnd);
      }
    }
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    if (kBwdStamps && threadIdx.x == 128) bwd_stamp(kBsRegsClaimed);
    PipeState<Cfg::kStages> ps;
    PipeState<BwdSmem<Cfg>::kDqBufs> dq_ps;  // deterministic: the dQ staging buffer
    bwd_consume<T, Cfg, kDet, kCapPath, false, Tile, kTail>(sm, p, t, warp / 4 - 1, ps, dq_ps, 0);
    if (pairs) {
      asm volatile("ld.shared.b32 %0, [%1];" : "=r"(item) : "r"(smem_addr(&sm.item)));
      int tiles;
      const Tile u = second(make_bwd_pair_tile<Cfg::kBlockN, Cfg::kBlockM, Tile>(p, item, tiles));
      if (tiles > 1) {
        // dK / dV staged out of the K / V tiles: the second tile's TMA may overwrite them.
        fence_smem_for_tma();
        __syncwarp();
        if (threadIdx.x % 32 == 0) mbar_arrive(&sm.kv_empty);
        // K / V load 1: with no left edge the first (lower) key block sees every q row that the
        // second sees, so when the second has steps the first had its load too.
        bwd_consume<T, Cfg, kDet, kCapPath>(sm, p, u, warp / 4 - 1, ps, dq_ps, 1);
      }
    }
  }
}

}  // namespace fastattn::sm90
