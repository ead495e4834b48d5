// dQ of one step of the Hopper backward: the MMA dQ = dS K and its accumulation into the q-block's
// fp32 run. d <= 128: staged in smem for the dQ writer warp, which bulk-adds each staged q-block
// (deterministic mode: in an order fixed by key block, a semaphore per q-block), or at d 64 / 96 in
// the default mode added by vector atomics from registers. d > 128: staged in the step's own Q / dO
// stage for the same writer warp (deterministic mode: in the same order). The default mode's dQ ring
// (d 128 windows with both edges; by default right-only ones, dq_ring.h): the writer warps add into an L2-resident slot per
// q-block, and the last one stores dq (bwd_ring_lead, bwd_ring_store).
#pragma once

#include "cuda/common/math.cuh"  // pack2
#include "cuda/sm90/bwd/dq_layout.h"
#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/stamps.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// Deterministic mode, in the dQ writer: waits until `want` key blocks have added into the q-block
// whose semaphore is `sem` (the ones above this one: tile.cuh, dq_last_block) ...
__device__ __forceinline__ void await_dq_turn(const int* sem, int want) {
  int seen;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(sem) : "memory");
  } while (seen < want);
}
// ... and once this thread's adds have landed, passes the turn to the next key block.
__device__ __forceinline__ void pass_dq_turn(int* sem) {
  tma_store_wait_all();
  asm volatile("fence.proxy.async.global;" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(sem) : "memory");
}

// d <= 128: this warpgroup's dQ (N columns, from float run_off of the run) into staging buffer
// `dq_ps` once the writer warp has read its previous contents (thread t's registers 4 q .. 4 q + 3
// as float4 128 q + t from run_off: dq_layout.h); each warp hands its part over on its own (no
// warpgroup barrier). kFenceByWriter (BwdConfig::kDqFenceByWriter): no proxy fence here; the stores
// reach the writer thread by the dq_full arrive (release) and its wait (acquire), and its one fence
// on that path orders them before the bulk add's async-proxy read (bwd_write_dq).
template <class Cfg, int N, bool kFenceByWriter = false>
__device__ __forceinline__ void stage_dq(BwdSmem<Cfg>& sm, const float (&dq)[N / 2], int run_off,
                                         PipeState<BwdSmem<Cfg>::kDqBufs> dq_ps) {
  const int b = dq_ps.stage();
  mbar_wait(&sm.dq_empty[b], dq_ps.phase() ^ 1);
  const uint32_t stage_addr = smem_addr(sm.dq[b] + run_off) + 16 * (threadIdx.x % 128);
#pragma unroll
  for (int q = 0; q < N / 8; ++q) sts_f32x4(stage_addr + 2048 * q, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
  if constexpr (!kFenceByWriter) fence_smem_for_tma();  // the bulk reduce-add reads it through the async proxy
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(&sm.dq_full[b]);
}

// dK += dS^T Q behind the step's dQ (kDqBeforeDk): dS^T from registers, Q N-major from the stage, committed.
template <class T, class Cfg>
__device__ __forceinline__ void issue_dk_from_ds(float (&dk)[Cfg::kDkvColsMax / 2], uint32_t (&dsf)[Cfg::kSdpCols / 16][4],
                                                 const uint8_t* q_stage) {
  const uint32_t q_lo = desc_n_major_lo(q_stage, Cfg::kQAtomBytes);
#pragma unroll
  for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk)
    WgmmaRS<T, Cfg::kHeadDim>::run(dk, dsf[kk], desc_n_major_add(q_lo, kk), 1);
  wgmma_commit();
}

// dK's MMA (the step's last reader of Q, dO and dS^T's registers) waited for, then the stage's Q and
// dO handed back to the producer: one arrival per consumer warp.
template <class Cfg>
__device__ __forceinline__ void release_stage_after_dk(BwdSmem<Cfg>& sm, int stage, float (&dk)[Cfg::kDkvColsMax / 2],
                                                       uint32_t (&dsf)[Cfg::kSdpCols / 16][4]) {
  wgmma_wait<0>();
  fence_operands(dk);
#pragma unroll
  for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk) fence_operands(dsf[kk]);
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(&sm.q_empty[stage]);
}

// Default mode, d 64 / 96: this warpgroup's dQ added into the run by vector fp32 atomics
// (red.global.add.v4.f32), fire and forget, in the staged order (dq_layout.h).
template <class Cfg, int N, class Tile>
__device__ __forceinline__ void add_dq_atomic(const BwdParams& p, const Tile& t, int h, int m, int run_off,
                                              const float (&dq)[N / 2]) {
  float4* run = reinterpret_cast<float4*>(p.dq_accum + t.template ws_row<Cfg::kBlockM>(p, h, m) * Cfg::kHeadDim + run_off) +
                threadIdx.x % 128;
#pragma unroll
  for (int q = 0; q < N / 8; ++q) atomicAdd(run + 128 * q, make_float4(dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]));
}

// dQ of one step for warpgroup wg's N columns from c0: dS (the step's dS^T buffer, MN-major A) times
// K's columns (MN-major B), then accumulated into the q-block's run. Cfg::kDqRowSplit (128-row
// q-blocks): warpgroup wg takes the q rows [64 wg, 64 wg + 64) (atom wg of the dS^T tile) and all
// of d (c0 = 0, N = d), added at float 64 d wg of the run. Cfg::kDqSwapAB (80-row q-blocks):
// dQ^T for warpgroup wg's 64 head-dim rows, N = the q rows (c0 unused), added at float 64 kBlockM wg.
// Cfg::kDqBeforeDk (d 128 / 64):
// issued behind the step's dV and ahead of its dK (RS), so that adding dQ (d 128 staged for the
// writer warp, d 64 by atomics) overlaps the dK MMA, whose end frees the Q / dO stage. Otherwise
// issued behind dV and dK (whose end frees the stage), then d 96 added by vector atomics
// (deterministic mode: staged for the writer), d 192 staged in the Q / dO stage for the dQ writer
// (d 256: bwd_dq_own_atoms).
// kDvFirst (BwdConfig::kDvBeforeDq): dV is waited for before dQ is issued, so that P^T's fragments are dead while
// dQ's accumulators live (the room that a fifth k-step of K in registers needs).
// after_dq(): called once dQ has left the registers (staged or added), the step's lowest register point with
// work still in flight (the bias kernel loads the next step's bias words there: bias.cuh).
struct BwdNoHook {
  __device__ __forceinline__ void operator()() const {}
};
template <class T, class Cfg, int N, bool kDet, bool kDvFirst = false, class Tile, class AfterDq = BwdNoHook>
__device__ __forceinline__ void bwd_dq(BwdSmem<Cfg>& sm, const BwdParams& p, const Tile& t, int c0, int wg,
                                       int ds_buf, int h, int m, float (&dv)[Cfg::kDvColsMax / 2],
                                       float (&dk)[Cfg::kDkvColsMax / 2], uint32_t (&pf)[Cfg::kSdpCols / 16][4],
                                       uint32_t (&dsf)[Cfg::kSdpCols / 16][4], PipeState<BwdSmem<Cfg>::kDqBufs> dq_ps,
                                       AfterDq after_dq = {}) {
  float dq[N / 2];
  // This warpgroup's floats in the run (dq_layout.h).
  const int run_off = Cfg::kDqSwapAB ? 64 * Cfg::kBlockM * wg : Cfg::kDqRowSplit ? 64 * Cfg::kHeadDim * wg : 64 * c0;
  if constexpr (kDvFirst) {
    wgmma_wait<0>();
    fence_operands(dv);
#pragma unroll
    for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk) fence_operands(pf[kk]);
  }
  if constexpr (Cfg::kDqSwapAB) {  // dQ^T = K^T dS^T: atom wg of K (MN-major A) times the q-major dS tile (K-major B)
    const uint32_t a_lo = desc_mn_major_lo(sm.k + wg * Cfg::kKAtomBytes, Cfg::kKAtomBytes);
    const uint32_t b_lo = desc_k_major_lo(sm.ds[ds_buf]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
      WgmmaSS<T, N, Major::MN, Major::K>::run(dq, desc_mn_major_add(a_lo, kk),
                                              desc_k_major_add(b_lo, Cfg::kQAtomBytes, kk), kk > 0);
    wgmma_commit();
  } else {
    const uint8_t* ds_rows = sm.ds[ds_buf];  // this warpgroup's q rows of the dS^T tile (kDqRowSplit: atom wg)
    if constexpr (Cfg::kDqRowSplit) ds_rows += wg * Cfg::kBlockN * kAtomRowBytes;
    const uint32_t a_lo = desc_mn_major_lo(ds_rows, Cfg::kBlockN * 128);
    const uint32_t b_lo =
        desc_mn_major_lo(sm.k + (c0 / kAtomCols) * Cfg::kKAtomBytes + (c0 % kAtomCols) * 2, Cfg::kKAtomBytes);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
      WgmmaSS<T, N, Major::MN, Major::MN>::run(dq, desc_mn_major_add(a_lo, kk), desc_mn_major_add(b_lo, kk), kk > 0);
    wgmma_commit();
  }
  if constexpr (Cfg::kDqBeforeDk) {
    issue_dk_from_ds<T, Cfg>(dk, dsf, sm.q[ds_buf]);
    // dV and dQ done; dK still reads dS^T (registers) and Q. dQ's read of the dS^T buffer must end here, before the
    // next step's kBwdDsBar: the bias kernels' staged seed writes that buffer's rows once past it.
    wgmma_wait<1>();
    if constexpr (!kDvFirst) {  // (else fenced above: a fence here would keep P^T's fragments live)
      fence_operands(dv);
#pragma unroll
      for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk) fence_operands(pf[kk]);
    }
    fence_operands(dq);
    if constexpr (kDet || !Cfg::kDqByAtomics)
      stage_dq<Cfg, N, Cfg::kDqFenceByWriter && !kDet>(sm, dq, run_off, dq_ps);
    else
      add_dq_atomic<Cfg, N>(p, t, h, m, run_off, dq);
    after_dq();
    release_stage_after_dk<Cfg>(sm, ds_buf, dk, dsf);
    return;
  }
  wgmma_wait<1>();  // dV, dK done: this stage's Q and dO are no longer read
  fence_operands(dv);
  fence_operands(dk);
#pragma unroll
  for (int kk = 0; kk < Cfg::kSdpCols / 16; ++kk) {  // their A fragments were read until now: keep them from reuse
    fence_operands(pf[kk]);
    fence_operands(dsf[kk]);
  }
  if constexpr (!Cfg::kDqInStage) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(&sm.q_empty[ds_buf]);
  }
  wgmma_wait<0>();  // dQ done with the dS^T buffer before the next kBwdDsBar (the staged bias seed writes it after)
  fence_operands(dq);
  const int tid = threadIdx.x % 128;
  if constexpr (!Cfg::kDqInStage) {
    if constexpr (kDet) {
      stage_dq<Cfg, N>(sm, dq, run_off, dq_ps);
    } else {
      add_dq_atomic<Cfg, N>(p, t, h, m, run_off, dq);
    }
    after_dq();
    return;
  }
  // d 192: staged in the step's Q / dO stage (the q-block's fp32 dQ is exactly as large: bytes
  // [0, kQBytes) of the run in q, the rest in dout; 192 / 128: in dO's stage, allocated as large as
  // Q's for it: smem.cuh), once both warpgroups' dV and dK are done with it, for the dQ writer
  // (bwd_write_dq_in_stage), which frees the stage once its adds have read it.
  // Thread t's registers 4 q .. 4 q + 3 are float4 128 q + t of the run (dq_layout.h).
  static_assert(BwdSmem<Cfg>::kDqBytes <= Cfg::kQBytes + BwdSmem<Cfg>::kDoStageBytes, "dQ fits the Q / dO stage");
  named_bar_sync(kBwdDsBar, 256);
  const uint32_t q_addr = smem_addr(sm.q[ds_buf]), do_addr = smem_addr(sm.dout[ds_buf]);
#pragma unroll
  for (int q = 0; q < N / 8; ++q) {
    const int b = 256 * c0 + 2048 * q;  // byte offset of this float4 row in the run (+ 16 tid)
    const uint32_t at = (b < Cfg::kQBytes ? q_addr + b : do_addr + (b - Cfg::kQBytes)) + 16 * tid;
    sts_f32x4(at, dq[4 * q], dq[4 * q + 1], dq[4 * q + 2], dq[4 * q + 3]);
  }
  fence_smem_for_tma();
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(&sm.dq_full[2 * ds_buf]);
}

// d 256 (Cfg::kDqOwnAtoms): dQ = dS K for warpgroup wg's 128 columns, issued ahead of dK += dS^T Q
// (issue_dk), then staged in the stage's atoms that only this warpgroup's dV and dK read: the first
// half of its run (float4 rows 0..7, dq_layout.h) in dO's atoms 2 wg, 2 wg + 1 once dV is done,
// while dK runs; the second half in Q's once dK is done. Each warp hands each half over to the dQ
// writer (bwd_write_dq_in_stage) on its own: no meeting of both warpgroups (neither writes what
// the other's MMAs still read), no bulk-copy wait in the consumers.
template <class T, class Cfg, class IssueDk>
__device__ __forceinline__ void bwd_dq_own_atoms(BwdSmem<Cfg>& sm, int wg, int s, float (&dv)[Cfg::kDvColsMax / 2],
                                                 float (&dk)[Cfg::kDkvColsMax / 2], IssueDk issue_dk) {
  constexpr int N = Cfg::kDqCols0, kHalfBytes = 2 * Cfg::kQAtomBytes, kHalfRows = N / 16;
  static_assert(Cfg::kDqCols1 == N && Cfg::kDkvCols0 == N && Cfg::kDkvCols1 == N && 64 * N * 4 == 2 * kHalfBytes,
                "each warpgroup's dQ fills its own atoms of Q and dO");
  float dq[N / 2];
  const uint32_t a_lo = desc_mn_major_lo(sm.ds[s], Cfg::kBlockN * 128);
  const uint32_t b_lo = desc_mn_major_lo(sm.k + (wg * N / kAtomCols) * Cfg::kKAtomBytes, Cfg::kKAtomBytes);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk)
    WgmmaSS<T, N, Major::MN, Major::MN>::run(dq, desc_mn_major_add(a_lo, kk), desc_mn_major_add(b_lo, kk), kk > 0);
  wgmma_commit();
  issue_dk();
  const uint32_t tid16 = 16 * (threadIdx.x % 128);
  auto stage_half = [&](const uint8_t* tile, int half) {
    const uint32_t at = smem_addr(tile + wg * kHalfBytes) + tid16;
#pragma unroll
    for (int q = 0; q < kHalfRows; ++q) {
      const int r = half * kHalfRows + q;
      sts_f32x4(at + 2048 * q, dq[4 * r], dq[4 * r + 1], dq[4 * r + 2], dq[4 * r + 3]);
    }
    fence_smem_for_tma();
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(&sm.dq_full[2 * s + half]);
  };
  wgmma_wait<1>();  // dV and dQ done; dK still reads dS^T and Q
  fence_operands(dv);
  fence_operands(dq);
  stage_half(sm.dout[s], 0);
  wgmma_wait<0>();  // dK done: Q's atoms are free
  fence_operands(dk);
  stage_half(sm.q[s], 1);
}

// The dQ writer at d > 128 (one thread of the producer warpgroup): per step, the dQ staged in the
// Q / dO stage added by bulk reduce-adds as soon as all eight consumer warps have staged it (d 256:
// each half, dO's atoms then Q's, one add per warpgroup; d 192: the run's bytes in Q, then in dO);
// the stage goes back to the producer once the adds have read it. Deterministic mode: the adds wait
// for the q-block's turn, which passes on once they have landed.
template <class Cfg, bool kDet>
__device__ __forceinline__ void bwd_write_dq_in_stage(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t) {
  constexpr int kHalfBytes = 2 * Cfg::kQAtomBytes, kWgFloats = 64 * Cfg::kDqCols0;
  PipeState<Cfg::kStages> ps;
  int h, m;
  t.first_step(p, h, m);
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance()) {
    const int s = ps.stage();
    float* run = p.dq_accum + t.ws_row<Cfg::kBlockM>(p, h, m) * Cfg::kHeadDim;
    int* sem = t.dq_sem(p, h, m);  // kDet
    if constexpr (kDet) await_dq_turn(sem, dq_last_block<Cfg::kBlockN, Cfg::kBlockM>(t, m) - t.n_block);
    if constexpr (Cfg::kDqOwnAtoms) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        mbar_wait(&sm.dq_full[2 * s + half], ps.phase());
        const uint8_t* tile = half ? sm.q[s] : sm.dout[s];
#pragma unroll
        for (int wg = 0; wg < 2; ++wg)
          bulk_reduce_add_f32(run + wg * kWgFloats + half * (kHalfBytes / 4),
                              reinterpret_cast<const float*>(tile + wg * kHalfBytes), kHalfBytes);
        tma_store_commit();
      }
    } else {
      mbar_wait(&sm.dq_full[2 * s], ps.phase());
      bulk_reduce_add_f32(run, reinterpret_cast<const float*>(sm.q[s]), Cfg::kQBytes);
      bulk_reduce_add_f32(run + Cfg::kQBytes / 4, reinterpret_cast<const float*>(sm.dout[s]),
                          BwdSmem<Cfg>::kDqBytes - Cfg::kQBytes);
      tma_store_commit();
    }
    tma_store_wait_read();
    mbar_arrive(&sm.q_empty[s]);
    if constexpr (kDet) pass_dq_turn(sem);  // the next key block's adds come after these
    t.next_step(p, h, m);
  }
  tma_store_wait_all();  // the CTA's smem must outlive the last add
}

// The dQ writer (one thread of the producer warpgroup), d <= 128: per step, once both consumer
// warpgroups have staged the q-block's dQ, one bulk reduce-add of the whole kBlockM x d run; the buffer
// goes back to the consumers when read. Deterministic mode: the add also waits until the key blocks
// above this one that see the q-block (tile.cuh, dq_last_block) have added theirs, and the turn
// passes on once it has landed; waiting here instead of in the consumers lets them run up to
// kDqBufs steps ahead. One flat loop over the steps, with the workspace offsets recomputed per
// step: the producer warpgroup's 24 registers hold no more. `ps` (the staging buffer) runs on from
// the CTA's previous tile (paired key blocks). kWriters > 1: writer w of them takes the
// steps w, w + kWriters, .. (buffer w when there are as many buffers), so that one add's landing
// and the turn it passes on overlap the next step's.
template <class Cfg, bool kDet, int kWriters = 1, class Tile>
__device__ __forceinline__ void bwd_write_dq(BwdSmem<Cfg>& sm, const BwdParams& p, const Tile& t, int writer,
                                             PipeState<BwdSmem<Cfg>::kDqBufs>& ps) {
  constexpr int kBytes = BwdSmem<Cfg>::kDqBytes;
  static_assert(kWriters == 1 || kWriters == BwdSmem<Cfg>::kDqBufs, "a writer per staging buffer");
  int h, m;
  t.first_step(p, h, m);
  if (kWriters > 1 && writer > 0) {
    ps.advance();
    t.next_step(p, h, m);
  }
  for (int i = t.steps(p.attn.q_per_kv) - writer; i > 0; i -= kWriters, ps.advance()) {
    const int b = ps.stage();
    const int64_t row = t.template ws_row<Cfg::kBlockM>(p, h, m);
    mbar_wait(&sm.dq_full[b], ps.phase());
    if constexpr (Cfg::kDqFenceByWriter && !kDet) fence_smem_for_tma();  // the consumers' staging (stage_dq)
    if (kBwdStamps && !kDet && threadIdx.x == 32) bwd_stamp_step(kBsStaged, t.steps(p.attn.q_per_kv) - i);
    if constexpr (kDet) await_dq_turn(t.dq_sem(p, h, m), dq_turn<Cfg::kBlockN, Cfg::kBlockM>(p, t, m));
    // d 128: the accumulator's lines kept in L2 for the next key blocks' adds and the postprocess
    // (measured -0.5 % at s4k full, -2.6 % at s1k causal); d 64 / 96 (deterministic mode only) not measured.
    if constexpr (Cfg::kHeadDim == 128)
      bulk_reduce_add_f32_evict_last(p.dq_accum + row * Cfg::kHeadDim, sm.dq[b], kBytes);
    else
      bulk_reduce_add_f32(p.dq_accum + row * Cfg::kHeadDim, sm.dq[b], kBytes);
    tma_store_commit();
    tma_store_wait_read();
    if (kBwdStamps && !kDet && threadIdx.x == 32) bwd_stamp_step(kBsAdded, t.steps(p.attn.q_per_kv) - i);
    mbar_arrive(&sm.dq_empty[b]);
    if (kBwdStamps && !kDet && threadIdx.x == 32) bwd_stamp_step(kBsReleased, t.steps(p.attn.q_per_kv) - i);
    if constexpr (kDet) pass_dq_turn(t.dq_sem(p, h, m));  // the next key block's adds come after these
    t.next_step(p, h, m);
    if constexpr (kWriters > 1) {  // past the other writer's step
      ps.advance();
      t.next_step(p, h, m);
    }
  }
  tma_store_wait_all();  // the CTA's smem must outlive the last add
}

// The dQ ring (dq_ring.h), in the writer's leader: waits until the slot's last earlier user
// (bwd_ring_wait_target) is done: all its adds landed and the slot cleared (its count at
// bwd_ring_free_count); the proxy fence orders that clearing (another CTA's generic stores) before
// this thread's bulk add.
__device__ __forceinline__ void await_ring_slot(const BwdParams& p, int at) {
  const int prev = bwd_ring_wait_target(at, p.dq_ring_slots, [&](int i) { return p.dq_ring_need[i]; });
  if (prev < 0) return;
  const int done = bwd_ring_free_count(p.dq_ring_need[prev]);
  const int* count = p.dq_ring_count + prev;
  int seen;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
  } while (seen < done);
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
// Counts this thread's add into its q-block, once it has landed (tma_store_wait_all); true for the
// last of `need`, which then sees every add (acquire) and reads the slot through the async proxy.
__device__ __forceinline__ bool ring_arrive(int* count, int need) {
  asm volatile("fence.proxy.async.global;" ::: "memory");
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
  if (old != need - 1) return false;
  asm volatile("fence.proxy.async.global;" ::: "memory");
  return true;
}
// Frees the slot: the clearing stores of every writer thread are fenced and behind the barrier.
__device__ __forceinline__ void ring_free(int* count) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(count) : "memory");
}

// dq rows of q-block m of q head h from a kBlockM x d fp32 tile in fragment order (smem address
// `tile`, dq_layout.h), scaled and rounded, by kThreads threads (tid) over a 128-thread
// pattern: thread slot u of the 128 holds, in float4 128 j + u, the column pair e.col + 8 j of rows
// e.row and e.row + 8 (e = dq_accum_pairs(u)); so each thread keeps two row pointers and walks the
// columns. Stored as 4-byte pairs (the ring's rule: dq pair-aligned); a warp's 32 cover 16 rows x 16 bytes.
template <class T, class Cfg, int kThreads>
__device__ __forceinline__ void store_dq_rows(const BwdParams& p, const BwdTile& t, int h, int m, uint32_t tile,
                                              int tid) {
  static_assert(Cfg::kBlockM == 64 && !Cfg::kDqSwapAB && !Cfg::kDqRowSplit && 128 % kThreads == 0,
                "64-row runs (dq_accum_pairs)");
  const int rows = min(Cfg::kBlockM, t.seq.rows_q - m * Cfg::kBlockM);
  T* dq = static_cast<T*>(p.dq) + int64_t(t.seq.batch_coord) * p.dq_stride_b +
          int64_t(t.seq.q_offset + m * Cfg::kBlockM) * p.dq_stride_s + int64_t(h) * p.dq_stride_h;
#pragma unroll 1
  for (int u = tid; u < 128; u += kThreads) {
    const DqPairs e = dq_accum_pairs(u, Cfg::kDqCols0);
    uint32_t* top = reinterpret_cast<uint32_t*>(dq + e.row * p.dq_stride_s + e.col);
    uint32_t* low = reinterpret_cast<uint32_t*>(dq + (e.row + 8) * p.dq_stride_s + e.col);
    const bool top_in = e.row < rows, low_in = e.row + 8 < rows;
#pragma unroll 4
    for (int j = 0; j < Cfg::kHeadDim / 8; ++j) {
      const float4 x = lds_f32x4(tile + 16 * (128 * j + u));
      if (top_in) top[4 * j] = cuda_backend::pack2<T>(p.scale * x.x, p.scale * x.y);
      if (low_in) low[4 * j] = cuda_backend::pack2<T>(p.scale * x.z, p.scale * x.w);
    }
  }
}

// The dQ writer of the ring path (BwdParams::dq_ring_slots, dq_ring.h): warp 1 of the producer
// warpgroup leads (its lane 0 issues the bulk copies and counts), warps 2-3 store dq; the split
// keeps each side's loop state within the warpgroup's 24 registers. Per step, once both consumer
// warpgroups have staged the q-block's dQ:
//   one visitor (need 1): dq stored straight from the staging buffer, the ring untouched;
//   else the leader waits until the q-block's slot is free (its last earlier user is done:
//   deadlock-free by the ticket order, dq_ring.h), bulk-adds into it and waits for the add to land,
//   then counts it; the last arrival loads the slot back into the staging buffer (its add has read
//   it), and the storers store dq from there, clear the slot and free it.
// A store job goes to the storers through sm.ring_job[post % 2] at a barrier of the 96 threads, and
// the leader goes on to the next step while they work (the stamps showed the CTA's life bound by
// the leader waiting for each store: notes, session 32); the storers hand the staging buffer back
// themselves. The leader writes a job's fields only after the previous post's barrier, which the
// storers reach once done with the job before it, the one that used the same fields. kind 0 ends
// their loop. kBwdRingBar meets the leader (at one of its two instructions) and the storers (at
// theirs): the leader's are PTX's non-aligned barrier (prim/regs.cuh), so no two aligned instructions
// meet. The storers' stays aligned: non-aligned there, ptxas loses their loop's uniform registers and
// the 24-register warpgroup spills (docs/notes/bwd-sm90.md, session 39).
enum RingJob : int { kRingEnd = 0, kRingSole = 1, kRingLast = 2, kRingAdded = 3 };  // kRingAdded: no job
constexpr int kRingWriters = 96, kRingStorers = 64;

template <class Cfg>
__device__ __forceinline__ void bwd_ring_lead(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t) {
  // The leader issues no proxy fence after its dq_full wait: the consumers must fence their staging.
  static_assert(!Cfg::kDqFenceByWriter, "kDqFenceByWriter needs the writer's fence here (bwd_write_dq)");
  constexpr int kBytes = BwdSmem<Cfg>::kDqBytes;
  const bool lane0 = threadIdx.x % 32 == 0;
  PipeState<BwdSmem<Cfg>::kDqBufs> ps;
  int posts = 0;
  int h, m;
  t.first_step(p, h, m);
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance(), t.next_step(p, h, m)) {
    const int b = ps.stage(), step = t.steps(p.attn.q_per_kv) - i;
    int job = kRingSole;
    if (lane0) {
      const int at = t.ring_position(p, h, m), slot_index = at & (p.dq_ring_slots - 1);
      mbar_wait(&sm.dq_full[b], ps.phase());
      if (kBwdStamps) bwd_stamp_step(kBsStaged, step);
      const int need = p.dq_ring_need[at];
      if (need > 1) {
        float* slot = p.dq_ring + int64_t(slot_index) * (kBytes / 4);
        await_ring_slot(p, at);
        if (kBwdStamps) bwd_stamp_step(kBsSlotFree, step);
        bulk_reduce_add_f32(slot, sm.dq[b], kBytes);
        tma_store_commit();
        tma_store_wait_all();
        if (kBwdStamps) bwd_stamp_step(kBsAdded, step);
        job = ring_arrive(p.dq_ring_count + at, need) ? kRingLast : kRingAdded;
        if (kBwdStamps) bwd_stamp_step(kBsCounted, step);
        if (job == kRingLast) {
          const uint64_t token = mbar_expect_tx_token(&sm.ring_full, kBytes);
          bulk_load(sm.dq[b], slot, kBytes, &sm.ring_full);
          mbar_wait_token(&sm.ring_full, token);
          if (kBwdStamps) bwd_stamp_step(kBsLoaded, step);
        }
      }
      if (kBwdStamps) bwd_stamp_job(step, job);
      if (job != kRingAdded) {
        int* f = sm.ring_job[posts % 2];
        f[0] = job;
        f[1] = b;
        f[2] = h;
        f[3] = m;
        f[4] = slot_index;
        f[5] = at;
        f[6] = step;
      }
    }
    job = __shfl_sync(0xffffffffu, job, 0);
    if (job != kRingAdded) {
      named_bar_sync_unaligned(kBwdRingBar, kRingWriters);  // the job to the storers, who release buffer b
      ++posts;
    } else {
      __syncwarp();
      if (lane0) mbar_arrive(&sm.dq_empty[b]);  // the add has read it (tma_store_wait_all)
      if (kBwdStamps && lane0) bwd_stamp_step(kBsReleased, step);
    }
  }
  if (lane0) sm.ring_job[posts % 2][0] = kRingEnd;
  named_bar_sync_unaligned(kBwdRingBar, kRingWriters);  // reached by the storers once their last job is done
}

// The storers (warps 2-3; sid 0..63): dq from the staging buffer of each job, and after the last
// arrival the slot cleared; once all 64 are done (kBwdRingStoreBar), sid 0 hands the buffer back to
// the consumers and frees the slot (each storer's clearing fenced before the barrier).
template <class T, class Cfg>
__device__ __forceinline__ void bwd_ring_store(BwdSmem<Cfg>& sm, const BwdParams& p, const BwdTile& t, int sid) {
  constexpr int kBytes = BwdSmem<Cfg>::kDqBytes;
  for (int post = 0;; ++post) {
    named_bar_sync(kBwdRingBar, kRingWriters);  // aligned: see above bwd_ring_lead
    // Each field read by its shared address where it is used, not held across the stores: the
    // producer warpgroup's 24 registers hold neither the fields nor a generic pointer to them (both spilled).
    const auto field = [&](int k) {
      int v;
      asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(smem_addr(&sm.ring_job[post % 2][k])));
      return v;
    };
    if (field(0) == kRingEnd) return;
    store_dq_rows<T, Cfg, kRingStorers>(p, t, field(2), field(3), smem_addr(sm.dq[field(1)]), sid);
    if (field(0) == kRingLast) {
      float4* run = reinterpret_cast<float4*>(p.dq_ring + int64_t(field(4)) * (kBytes / 4));
#pragma unroll 4
      for (int i = sid; i < kBytes / 16; i += kRingStorers) run[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      __threadfence();
    }
    named_bar_sync(kBwdRingStoreBar, kRingStorers);
    if (sid == 0) {
      mbar_arrive(&sm.dq_empty[field(1)]);
      if (field(0) == kRingLast) ring_free(p.dq_ring_count + field(5));
      if (kBwdStamps) {
        bwd_stamp_step(kBsStored, field(6));
        bwd_stamp_step(kBsReleased, field(6));
      }
    }
  }
}

}  // namespace fastattn::sm90
