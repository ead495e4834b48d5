// Warp-specialized Hopper forward: one producer warp streams Q once and K/V tiles through a
// 2-stage smem ring with TMA; two consumer warpgroups each own 64 query rows and run
//   S = Q K^T (SS-wgmma) -> keep-bit mask on partial tiles -> online softmax -> O += P V (RS-wgmma)
// with IntraWG overlap: the QK^T of tile n and the PV of tile n-1 are in flight together, and the
// softmax of tile n runs while PV(n-1) is still on the tensor cores; and InterWG ping-pong: the two
// warpgroups take turns issuing their MMAs (named barriers), so one's softmax hides the other's GEMMs.
// The grid is persistent (one CTA per SM): each CTA walks a static list of tiles (tile_order.cuh),
// and the producer loads the next tile's Q and K/V while the consumers finish the current one.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/ptx>

#include "cuda/common/fwd_params.h"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/seqlen.cuh"
#include "cuda/sched/tile_order.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/prof/loop_probes.cuh"
#include "cuda/sm90/fwd_config.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

using cuda_backend::FwdParams;

constexpr int kPingPongBar = 1;  // named barriers 1 and 2 (0 is __syncthreads)

template <class Cfg>
struct FwdSmem {
  alignas(1024) uint8_t q[Cfg::kAtoms * Cfg::kQAtomBytes];
  alignas(1024) uint8_t k[Cfg::kStages][Cfg::kAtoms * Cfg::kKVAtomBytes];
  alignas(1024) uint8_t v[Cfg::kStages][Cfg::kAtoms * Cfg::kKVAtomBytes];
  uint64_t q_full, q_empty;  // q_empty: both consumer warpgroups issued their last QK of a tile
  uint64_t k_full[Cfg::kStages], v_full[Cfg::kStages];
  uint64_t k_empty[Cfg::kStages], v_empty[Cfg::kStages];
};

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The tile being worked on: which sequence, head and query rows, and which KV tiles it sees.
struct FwdTile {
  cuda_backend::SeqInfo seq;
  cuda_backend::WindowMask mask;
  int head, kv_head, m0, m1, n_begin, n_end;
  __device__ __forceinline__ bool sees_keys() const { return n_end > n_begin; }
};

template <class Cfg>
__device__ __forceinline__ FwdTile make_tile(const FwdParams& p, int id) {
  const cuda_backend::TileCoord c = cuda_backend::tile_coord(p, id);
  cuda_backend::SeqInfo seq(p, c.batch);
  cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, p.window_left, p.window_right};
  FwdTile t{seq, mask, c.head, c.head / p.q_per_kv, c.m_block * Cfg::kBlockM, 0, 0, 0};
  t.m1 = min(t.m0 + Cfg::kBlockM, seq.len_q);  // rows [m1, rows_q) are only zero-filled
  if (t.m0 < t.m1) mask.tile_range(t.m0, t.m1, Cfg::kBlockN, t.n_begin, t.n_end);
  return t;
}

// This CTA's tiles of the persistent schedule (sched/tile_order.cuh), in order, skipping those
// past their sequence's end: f(tile, id) for each. Producer and consumers call it alike.
template <class Cfg, class F>
__device__ __forceinline__ void for_each_tile(const FwdParams& p, F&& f) {
  for (int r = 0; r * cuda_backend::cta_count() < p.tiles; ++r) {
    const int id = cuda_backend::tile_of_round(r, cuda_backend::cta_index(), cuda_backend::cta_count());
    if (id >= p.tiles) continue;
    const FwdTile t = make_tile<Cfg>(p, id);
    if (t.m0 < t.seq.rows_q) f(t, id);
  }
}

// Producer, one tile: Q (once the consumers are done with the previous tile's), then K and V of
// each visible KV tile, last first (the partial ones come first, so masking work overlaps with the
// later full tiles). `ps` and `q_phase` carry the ring and Q-buffer state from tile to tile.
template <class Cfg>
__device__ __forceinline__ void produce(FwdSmem<Cfg>& sm, const FwdTile& t, const CUtensorMap* tq,
                                        const CUtensorMap* tk, const CUtensorMap* tv,
                                        PipeState<Cfg::kStages>& ps, uint32_t q_phase) {
  mbar_wait(&sm.q_empty, q_phase ^ 1);
  mbar_expect_tx(&sm.q_full, Cfg::kAtoms * Cfg::kQAtomBytes);
#pragma unroll
  for (int a = 0; a < Cfg::kAtoms; ++a)
    tma_load_4d(sm.q + a * Cfg::kQAtomBytes, tq, a * kAtomCols, t.seq.q_offset + t.m0, t.head,
                t.seq.batch_coord, &sm.q_full);
  // One K or V tile into ring slot `stage`, once the consumers have released that slot.
  auto load_tile = [&](const CUtensorMap* map, uint8_t* dst, uint64_t* empty, uint64_t* full, uint32_t phase,
                       int row) {
    mbar_wait(empty, phase ^ 1);
    mbar_expect_tx(full, Cfg::kAtoms * Cfg::kKVAtomBytes);
#pragma unroll
    for (int a = 0; a < Cfg::kAtoms; ++a)
      tma_load_4d(dst + a * Cfg::kKVAtomBytes, map, a * kAtomCols, row, t.kv_head, t.seq.batch_coord, full);
  };
  for (int n = t.n_end - 1; n >= t.n_begin; --n, ps.advance()) {
    const int row = t.seq.k_offset + n * Cfg::kBlockN;
    load_tile(tk, sm.k[ps.stage()], &sm.k_empty[ps.stage()], &sm.k_full[ps.stage()], ps.phase(), row);
    load_tile(tv, sm.v[ps.stage()], &sm.v_empty[ps.stage()], &sm.v_full[ps.stage()], ps.phase(), row);
  }
}

// One consumer warpgroup, one tile: 64 query rows against every visible KV tile, then the
// epilogue. `ps` (ring slot of the tile's first K/V) and `q_phase` match the producer's.
template <class T, class Cfg>
__device__ __forceinline__ void consume(FwdSmem<Cfg>& sm, const FwdTile& t, const FwdParams& p,
                                        int wg, int id, PipeState<Cfg::kStages>& ps, uint32_t q_phase) {
  constexpr int D = Cfg::kHeadDim, N = Cfg::kBlockN;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4;
  const int quad_col = lane % 4;
  const int row0 = t.m0 + wg * 64 + warp_in_wg * 16 + lane / 4;  // rows row0 and row0 + 8
  const uint8_t* q_rows = sm.q + wg * 64 * kAtomRowBytes;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
  prof::LoopProbe probe(p, wg);  // empty unless FASTATTN_LOOP_PROBES (issue #6)

  auto issue_qk = [&](int stage) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      WgmmaSS<T, N>::run(s, desc_k_major(q_rows, Cfg::kQAtomBytes, kk),
                         desc_k_major(sm.k[stage], Cfg::kKVAtomBytes, kk), kk > 0);
    wgmma_commit();
  };
  auto issue_pv = [&](int stage) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
      WgmmaRS<T, D>::run(o, pf[kk], desc_n_major(sm.v[stage], Cfg::kKVAtomBytes, kk), 1);
    wgmma_commit();
  };
  // Warp-granular release: each of the 8 consumer warps arrives once its wgmma reads are done.
  auto release = [&](uint64_t* bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // Softcap, then the keep-bit mask on partial tiles only.
  auto shape_scores = [&](int n) {
    if (p.softcap != 0.f) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) s[i] = p.softcap * tanhf(s[i] * p.softcap_in);
    }
    const int n0 = n * N;
    if (!t.mask.tile_full(t.m0, t.m1, n0, N)) {
#ifdef FASTATTN_MASK_PLAIN
      cuda_backend::apply_window_plain<N, 0>(s, t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col);
      cuda_backend::apply_window_plain<N, 1>(s, t.mask.lo(row0 + 8) - n0, t.mask.hi(row0 + 8) - n0, quad_col);
#else
      cuda_backend::apply_keep_bits<N, 0>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col));
      cuda_backend::apply_keep_bits<N, 1>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row0 + 8) - n0, t.mask.hi(row0 + 8) - n0, quad_col));
#endif
    }
  };
  auto scores_to_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  };

  // Ping-pong: warpgroup w issues only after bar(w) opened, then opens the other's. Both run
  // n_tiles + 1 issue phases; warpgroup 1 opens bar(0) once up front and skips its last opening,
  // so every barrier sees as many arrivals as syncs.
  const int n_tiles = t.n_end - t.n_begin;
  int phases_left = n_tiles + 1;
  auto my_turn = [&]() {
    if constexpr (Cfg::kPingPong) named_bar_sync(kPingPongBar + wg, 256);
  };
  auto your_turn = [&]() {
    if constexpr (Cfg::kPingPong)
      if (--phases_left > 0 || wg == 0) named_bar_arrive(kPingPongBar + (1 - wg), 256);
  };
  if (n_tiles > 0) {
    if (Cfg::kPingPong && wg == 1) named_bar_arrive(kPingPongBar, 256);
    mbar_wait(&sm.q_full, q_phase);
    mbar_wait(&sm.k_full[ps.stage()], ps.phase());
    my_turn();
    issue_qk(ps.stage());
    your_turn();
    wgmma_wait<0>();
    fence_operands(s);
    release(&sm.k_empty[ps.stage()]);
    shape_scores(t.n_end - 1);
    softmax.step(s, p.scale_log2, alpha);
    scores_to_p();

    for (int n = t.n_end - 2; n >= t.n_begin; --n) {
      probe.mark(prof::kIterBegin);
      PipeState<Cfg::kStages> prev = ps;
      ps.advance();
      mbar_wait(&sm.k_full[ps.stage()], ps.phase());
      mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      probe.mark(prof::kTilesReady);
      my_turn();
      probe.mark(prof::kTurnTaken);
      issue_qk(ps.stage());
      issue_pv(prev.stage());
      your_turn();
      probe.mark(prof::kIssued);
      wgmma_wait<1>();  // S ready; PV(n+1) may still run
      fence_operands(s);
      probe.mark(prof::kScoresReady);
      release(&sm.k_empty[ps.stage()]);
      shape_scores(n);
      probe.mark(prof::kMasked);
      softmax.step(s, p.scale_log2, alpha);
      probe.mark(prof::kSoftmaxDone);
      wgmma_wait<0>();
      fence_operands(o);
      probe.mark(prof::kPvDone);
      release(&sm.v_empty[prev.stage()]);
      cuda_backend::scale_rows<D>(o, alpha);
      scores_to_p();
      probe.mark(prof::kIterEnd);
    }
    release(&sm.q_empty);  // every QK of this tile is done: the producer may load the next Q
    mbar_wait(&sm.v_full[ps.stage()], ps.phase());
    my_turn();
    issue_pv(ps.stage());
    your_turn();
    wgmma_wait<0>();
    fence_operands(o);
    release(&sm.v_empty[ps.stage()]);
    ps.advance();
  }

  // Epilogue: normalise, store O (rows past the sequence end are dropped) and LSE. The tile's
  // sequence and head are derived again from `id` rather than kept through the loop: at d = 256
  // those registers were what the consumer lacked (a 4-byte spill).
  const FwdTile e = make_tile<Cfg>(p, id);
  const int erow0 = e.m0 + wg * 64 + warp_in_wg * 16 + lane / 4;
  float inv[2], lse[2];
  softmax.finish(p.scale_log2, inv, lse);
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (erow0 + 8 * h >= e.seq.len_q) {  // past seqused: out 0, lse -inf (reference convention)
      inv[h] = 0.f;
      lse[h] = -INFINITY;
    }
  cuda_backend::scale_rows<D>(o, inv);
  const int64_t b_off = e.seq.batch_coord;  // 0 for varlen
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = erow0 + 8 * h;
    if (r >= e.seq.rows_q) continue;
    T* out = static_cast<T*>(p.out) + b_off * p.out_stride_b + (e.seq.q_offset + r) * p.out_stride_s +
             int64_t(e.head) * p.out_stride_h;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * quad_col) = pack2<T>(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
    if (p.lse != nullptr && quad_col == 0)
      p.lse[b_off * p.lse_stride_b + int64_t(e.head) * p.lse_stride_h + (e.seq.q_offset + r) * p.lse_stride_s] = lse[h];
  }
  probe.mark(prof::kEpilogueEnd);
  probe.finish();
}

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ FwdParams p) {
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<FwdSmem<Cfg>*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    mbar_init(&sm.q_full, 1);
    mbar_init(&sm.q_empty, 4 * Cfg::kConsumerWarpgroups);
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.k_empty[s], 4 * Cfg::kConsumerWarpgroups);
      mbar_init(&sm.v_empty[s], 4 * Cfg::kConsumerWarpgroups);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();

  // Both roles walk the same tiles; tiles that see no key (empty window, s_k = 0) load nothing:
  // the consumers only write their zero output and -inf LSE.
  PipeState<Cfg::kStages> ps;
  uint32_t q_phase = 0;
  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    for_each_tile<Cfg>(p, [&](const FwdTile& t, int) {
      if (!t.sees_keys()) return;
      produce<Cfg>(sm, t, &tq, &tk, &tv, ps, q_phase);
      q_phase ^= 1;
    });
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    for_each_tile<Cfg>(p, [&](const FwdTile& t, int id) {
      consume<T, Cfg>(sm, t, p, warp / 4 - 1, id, ps, q_phase);
      if (t.sees_keys()) q_phase ^= 1;
    });
  }
}

}  // namespace fastattn::sm90
