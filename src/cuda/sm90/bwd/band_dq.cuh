// dQ of one step of the recompute band (band.h, band_kernel.cuh): dQ = dS K as the plain d 128 step
// computes it (issued ahead of dK += dS^T Q, kDqBeforeDk), then kept in this thread's registers and
// handled by the step's job (BwdBandJobs) while dK runs: held in its slot (bwd_band_slot) until the
// q-block's upper visitor, or (after adding the held partial back) scaled, rounded and stored to dq as
// element pairs straight from the accumulator. No staging buffer handed to a writer, no accumulator,
// no atomics: each slot element is written and read back by the same thread (the same fragment
// position in both steps), so holding needs no barrier and no fence.
#pragma once

#include "cuda/common/math.cuh"  // pack2
#include "cuda/sm90/bwd/band.h"
#include "cuda/sm90/bwd/dq.cuh"  // issue_dk_from_ds, release_stage_after_dk
#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// Global spill slots (GQA, slots past the two smem buffers): L2 only (.cg), the thread's own data.
__device__ __forceinline__ float4 ldg_cg_f32x4(const float* at) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(at)
               : "memory");
  return v;
}
__device__ __forceinline__ void stg_cg_f32x4(float* at, float a, float b, float c, float d) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(at), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// This warpgroup's N columns from c0 of q-block m's dq (q head h), from the wgmma accumulator:
// register 4 j + 2 hh + e is q row 16 warp + lane / 4 + 8 hh, column c0 + 8 j + 2 (lane % 4) + e.
// Rows past the sequence's are skipped.
template <class T, int N>
__device__ __forceinline__ void store_band_dq(const BwdParams& p, const BwdTile& t, int h, int m, int c0,
                                              const float (&dq)[N / 2]) {
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) % 4 * 16 + lane / 4;
  const int rows = t.seq.rows_q - m * 64;
  T* base = static_cast<T*>(p.dq) + int64_t(t.seq.batch_coord) * p.dq_stride_b +
            int64_t(t.seq.q_offset + m * 64 + row0) * p.dq_stride_s + int64_t(h) * p.dq_stride_h + c0 + 2 * (lane % 4);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    if (row0 + 8 * hh >= rows) continue;
    uint32_t* at = reinterpret_cast<uint32_t*>(base + 8 * hh * p.dq_stride_s);
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
      at[4 * j] = cuda_backend::pack2<T>(p.scale * dq[4 * j + 2 * hh], p.scale * dq[4 * j + 2 * hh + 1]);
  }
}

// The band's dQ for warpgroup wg's N columns from c0 (the d 128 tile: 64 and 64), step (h, m) on the
// dS^T buffer / Q stage `s`. The dQ MMA runs on every step, also kBandDqNone's (one MMA of the band's
// top q-blocks wasted, for one code path around the wgmma accumulators).
template <class T, class Cfg, int N>
__device__ __forceinline__ void bwd_dq_band(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t, int c0, int s,
                                            int h, int m, const BwdBandJobs& jobs, float (&dv)[Cfg::kDvColsMax / 2],
                                            float (&dk)[Cfg::kDkvColsMax / 2], uint32_t (&pf)[Cfg::kSdpCols / 16][4],
                                            uint32_t (&dsf)[Cfg::kSdpCols / 16][4]) {
  static_assert(Cfg::kHeadDim == 128 && Cfg::kBlockM == 64 && Cfg::kDqBeforeDk && !Cfg::kDqSwapAB && !Cfg::kDqRowSplit,
                "the band runs on the d 128 64-row tile");
  // Slots 0 and 1 are sm.dq[0] and sm.dq[1]: with one staging buffer (smem.cuh drops the second when
  // the struct grows past 227 KB) slot 1 would index past the struct.
  static_assert(BwdSmem<Cfg>::kDqBufs == 2, "the band holds partial dQ in both smem staging buffers");
  float dq[N / 2];
  {
    const uint32_t a_lo = desc_mn_major_lo(sm.ds[s], Cfg::kBlockN * 128);
    const uint32_t b_lo = desc_mn_major_lo(sm.k + (c0 / kAtomCols) * Cfg::kKAtomBytes, Cfg::kKAtomBytes);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
      WgmmaSS<T, N, Major::MN, Major::MN>::run(dq, desc_mn_major_add(a_lo, kk), desc_mn_major_add(b_lo, kk), kk > 0);
    wgmma_commit();
  }
  issue_dk_from_ds<T, Cfg>(dk, dsf, sm.q[s]);
  wgmma_wait<1>();  // dV and dQ done; dK still reads dS^T (registers) and Q
  fence_operands(dv);
#pragma unroll
  for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk) fence_operands(pf[kk]);
  fence_operands(dq);
  const int job = jobs.job(m);
  if (job != kBandDqNone) {
    // The slot of (q head, q-block): this warpgroup's floats of it from 64 c0, float4 128 q + tid.
    const int g = p.attn.q_per_kv, slot = bwd_band_slot(m, h - t.kv_head * g, g), tid = threadIdx.x % 128;
    const uint32_t smem_at = smem_addr(sm.dq[slot & 1] + 64 * c0) + 16 * tid;
    // The global slot's run (GQA's slots 2..; used only there: band_spill is null where g = 1).
    const int64_t spill_run = slot < 2 ? 0 : int64_t(blockIdx.x) * bwd_band_spill_slots(g) + (slot - 2);
    float* spill = p.band_spill + spill_run * (64 * Cfg::kHeadDim) + 64 * c0 + 4 * tid;
    if (job == kBandDqResume) {
#pragma unroll
      for (int q = 0; q < N / 8; ++q) {
        const float4 x = slot < 2 ? lds_f32x4(smem_at + 2048 * q) : ldg_cg_f32x4(spill + 512 * q);
        dq[4 * q] += x.x;
        dq[4 * q + 1] += x.y;
        dq[4 * q + 2] += x.z;
        dq[4 * q + 3] += x.w;
      }
    }
    if (job == kBandDqHold) {
#pragma unroll
      for (int q = 0; q < N / 8; ++q) {
        if (slot < 2)
          sts_f32x4(smem_at + 2048 * q, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
        else
          stg_cg_f32x4(spill + 512 * q, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
      }
    } else {
      store_band_dq<T, N>(p, t, h, m, c0, dq);
    }
  }
  release_stage_after_dk<Cfg>(sm, s, dk, dsf);
}

}  // namespace fastattn::sm90
