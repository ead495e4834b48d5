// The recompute band (band.h; docs/notes/bwd-sm90.md, session 34): the d 128 64-row tile's default
// mode under a window with right = 0 and 0 < left <= 64, a kernel of its own beside the plain and
// ring kernels (kernel.cuh), whose steps it shares (bwd_consume with kBand). A CTA takes band j of
// one unit (sequence, KV head): key blocks [first, end) = [B j, B j + B) clipped to the sequence,
// and before them the halo block first - 1 for the steps of the q-blocks it shares with block first
// (bwd_band_halo_q_blocks: dQ only, its dK / dV not stored: the band below stores them). K / V of each
// key block in turn (the paired key blocks' hand-over: kv_empty, the next block's first Q / dO
// stages issued before it), the steps of each block its q-blocks rising with the group's heads
// inner, and each step's dQ by its job (band_dq.cuh): held on chip for the upper visitor, or stored
// to dq once whole. Every q-block's dQ is summed in its one owning CTA in a fixed order: no
// accumulator, no ring, no ticket, no postprocess, deterministic.
#pragma once

#include "cuda/sm90/bwd/band.h"
#include "cuda/sm90/bwd/kernel.cuh"

namespace fastattn::sm90 {

// Key block k of band item `item` (unit-major: item = unit x band_count + j), walked rising with the
// heads inner; k = first - 1 (the halo block) keeps only the halo's q-blocks.
template <int kBlockN, int kBlockM>
__device__ __forceinline__ BwdTile make_bwd_band_tile(const BwdParams& p, int item, int k, int first) {
  BwdTile t;
  const int rest = item / p.band_count;
  t.kv_head = rest % p.attn.heads_kv;
  t.batch = rest / p.attn.heads_kv;
  t.seq = cuda_backend::BwdSeq(p, t.batch, kBlockM);
  set_bwd_tile_block<kBlockN, kBlockM>(p, t, k);
  if (k < first) {
    const cuda_backend::BlockRange halo = bwd_band_halo_q_blocks(t.mask, first, kBlockN, kBlockM);
    t.q_blocks.begin = halo.begin;
    t.q_blocks.end = halo.end;
  }
  t.walk = kBwdWalkUpInner;
  return t;
}

// The band's key blocks [first, end) within the sequence's (rows_k), and the first block the CTA
// works on: first - 1 where the halo has steps.
template <int kBlockN, int kBlockM>
__device__ __forceinline__ void bwd_band_span(const BwdParams& p, int item, int& first, int& end, int& begin) {
  const BwdTile t = make_bwd_band_tile<kBlockN, kBlockM>(p, item, 0, 0);
  bwd_band_blocks(item % p.band_count, p.band_blocks, (t.seq.rows_k + kBlockN - 1) / kBlockN, first, end);
  begin = first > 0 && !bwd_band_halo_q_blocks(t.mask, first, kBlockN, kBlockM).empty() ? first - 1 : first;
}

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    bwd_band_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                    const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tdo,
                    const __grid_constant__ BwdParams p) {
  static_assert(Cfg::kHasRingKernel && !Cfg::kSplitD, "the band runs on the d 128 64-row tile");
  static_assert(Cfg::kBlockM + kBwdBandMaxLeft <= Cfg::kBlockN,
                "a q-block's keys within two consecutive key blocks (bwd_band_serves)");
  constexpr int kN = Cfg::kBlockN, kM = Cfg::kBlockM;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uintptr_t base = reinterpret_cast<uintptr_t>(smem_raw);
  auto& sm = *reinterpret_cast<BwdSmem<Cfg>*>(kBwdSmemSlack<Cfg> > 0 ? (base + 1023) & ~uintptr_t(1023) : base);
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    prefetch_tma_maps(&tq, &tk, &tv, &tdo);
    mbar_init(&sm.kv_full, 1);
    mbar_init(&sm.kv_empty, 8);  // one arrival per consumer warp: the key block's K / V are free again
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.q_full[s], 1);
      mbar_init(&sm.q_empty[s], 8);  // one arrival per consumer warp
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
    // Launched early behind the preprocess (launch.cuh): its lse, D (and dq's zeroed q-blocks) are
    // visible past this wait; every thread reads global memory only after the barrier below.
    cuda_backend::grid_dependency_wait();
  }
  __syncthreads();
  const int item = int(blockIdx.x);
  int first, end, begin;
  bwd_band_span<kN, kM>(p, item, first, end, begin);
  if (first >= end) return;  // past the sequence's keys
  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) {
      // K / V loads so far: the first goes out at once, each later one once the consumers are done
      // with the previous block's K / V (kv_empty's phase loads - 1). Blocks without steps load nothing.
      PipeState<Cfg::kStages> ps;
      int loads = 0;
      for (int k = begin; k < end; ++k) {
        const BwdTile t = make_bwd_band_tile<kN, kM>(p, item, k, first);
        if (t.steps(p.attn.q_per_kv) == 0) continue;
        if (loads == 0)
          bwd_produce<Cfg, false>(sm, p, t, &tq, &tk, &tv, &tdo, ps, sm.q_full);
        else
          bwd_produce<Cfg, true>(sm, p, t, &tq, &tk, &tv, &tdo, ps, sm.q_full, (loads - 1) & 1);
        ++loads;
      }
    }
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    const int wg = warp / 4 - 1;
    PipeState<Cfg::kStages> ps;
    PipeState<BwdSmem<Cfg>::kDqBufs> dq_ps;  // unused by the band's steps (bwd_consume's signature)
    int loads = 0;
    for (int k = begin; k < end; ++k) {
      const BwdTile t = make_bwd_band_tile<kN, kM>(p, item, k, first);
      if (t.steps(p.attn.q_per_kv) == 0) {
        // No q row sees the block (keys before the window's reach, or past len_k): dK = dV = 0,
        // stored from registers (the K / V tiles may be in use by a load).
        const int lane = threadIdx.x % 32;
        const float zeros[Cfg::kHeadDim / 2] = {};
        store_dk_dv<T, Cfg::kHeadDim>(p, t, t.n0 + 64 * wg + (warp % 4) * 16 + lane / 4, lane % 4, 0, zeros, zeros);
        continue;
      }
      const BwdBandJobs jobs = bwd_band_jobs(t.mask, k, first, end, kN, kM);
      // (Its end arrives on kv_empty: the next load may overwrite the K / V tiles.)
      bwd_consume<T, Cfg, false, BwdCap::Off, true>(sm, p, t, wg, ps, dq_ps, loads & 1, jobs, k >= first);
      ++loads;
    }
  }
}

}  // namespace fastattn::sm90
