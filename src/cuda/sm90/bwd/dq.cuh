// dQ of one step of the Hopper backward: the MMA dQ = dS K and its accumulation into the q-block's
// fp32 run: vector atomics by default; in deterministic mode staged in smem for the dQ writer warp,
// which adds the staged q-blocks in an order fixed by key block (a semaphore per q-block).
#pragma once

#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// dQ of one step for warpgroup wg's N columns from c0: dS (the step's dS^T buffer, MN-major A) times
// K's columns (MN-major B), issued behind the step's dV and dK MMAs (whose end frees the Q / dO
// stage), then accumulated into the q-block's run (default) or staged in dQ buffer `dq_ps` for
// the writer warp (deterministic).
template <class T, class Cfg, int N, bool kDet>
__device__ __forceinline__ void bwd_dq(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t, int c0, int ds_buf,
                                       int h, int m, float (&dv)[Cfg::kHeadDim / 2], float (&dk)[Cfg::kHeadDim / 2],
                                       uint32_t (&pf)[4][4], uint32_t (&dsf)[4][4], uint64_t* q_empty,
                                       PipeState<BwdSmem<Cfg>::kDqBufs> dq_ps) {
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
  // dq_accum_index): coalesced 512-byte rows per warp instruction. The staging buffer has the same order.
  const int tid = threadIdx.x % 128;
  if constexpr (!kDet) {  // vector fp32 atomics (red.global.add.v4.f32), fire and forget
    float* dst = p.dq_accum + (int64_t(h) * p.padded_rows + t.seq.padded_q + m * 64) * Cfg::kHeadDim + 64 * c0;
#pragma unroll
    for (int q = 0; q < N / 8; ++q)
      atomicAdd(reinterpret_cast<float4*>(dst) + 128 * q + tid,
                make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]));
  } else {
    // Deterministic: into the staging buffer once the writer has read its previous contents; each
    // warp hands its part over on its own (no warpgroup barrier).
    const int b = dq_ps.stage();
    mbar_wait(&sm.dq_empty[b], dq_ps.phase() ^ 1);
    const uint32_t stage_addr = smem_addr(sm.dq[b] + 64 * c0) + 16 * tid;
#pragma unroll
    for (int q = 0; q < N / 8; ++q) sts_f32x4(stage_addr + 2048 * q, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
    fence_smem_for_tma();  // the bulk reduce-add reads it through the async proxy
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(&sm.dq_full[b]);
  }
}

// Deterministic mode's dQ writer (one thread of the producer warpgroup): per step, once both
// consumer warpgroups have staged the q-block's dQ and the key blocks above this one that see the
// q-block (tile.cuh, dq_last_block) have added theirs, one bulk reduce-add of the whole 64 x d run;
// the buffer goes back to the consumers when read, and the q-block's turn passes on once the adds
// have landed. Waiting here instead of in the consumers lets them run up to kDqBufs steps ahead.
// One flat loop over the steps, with the workspace offsets recomputed per step: the producer
// warpgroup's 24 registers hold no more.
template <class Cfg>
__device__ __forceinline__ void bwd_write_dq(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t) {
  constexpr int kBytes = BwdSmem<Cfg>::kDqBytes;
  PipeState<BwdSmem<Cfg>::kDqBufs> ps;
  int h = t.kv_head * p.attn.q_per_kv, m = t.q_blocks.begin;
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance()) {
    const int b = ps.stage();
    const int want = dq_last_block(t, m) - t.n_block;  // the key blocks adding into q-block m before this one
    const int64_t sem_at = (int64_t(t.batch) * p.attn.heads_q + h) * p.m_blocks + m;
    mbar_wait(&sm.dq_full[b], ps.phase());
    int seen;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(p.dq_sem + sem_at) : "memory");
    } while (seen < want);
    const int64_t row = int64_t(h) * p.padded_rows + t.seq.padded_q + m * 64;
    bulk_reduce_add_f32(p.dq_accum + row * Cfg::kHeadDim, sm.dq[b], kBytes);
    tma_store_commit();
    tma_store_wait_read();
    mbar_arrive(&sm.dq_empty[b]);
    tma_store_wait_all();  // landed: the next key block's adds come after these
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(p.dq_sem + sem_at) : "memory");
    if (++m == t.q_blocks.end) {  // the next q head of the group
      m = t.q_blocks.begin;
      ++h;
    }
  }
}

}  // namespace fastattn::sm90
