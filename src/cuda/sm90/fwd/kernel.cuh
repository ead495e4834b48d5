// Warp-specialized Hopper forward: one producer warp streams Q once and K/V tiles through a
// 2-stage smem ring with TMA; two (or three) consumer warpgroups each own 64 query rows and run
//   S = Q K^T (SS-wgmma) -> keep-bit mask on partial tiles -> online softmax -> O += P V (RS-wgmma)
// with IntraWG overlap: the QK^T of tile n and the PV of tile n-1 are in flight together, and the
// softmax of tile n runs while PV(n-1) is still on the tensor cores; and InterWG ping-pong: the
// warpgroups take turns issuing their MMAs (named barriers), so one's softmax hides the others' GEMMs.
// The grid is persistent (one CTA per SM): each CTA walks a static list of tiles (tile_order.cuh)
// as one stream of KV blocks. With two Q buffers (d <= 192) a tile boundary is an ordinary loop
// iteration: the next tile's first QK is issued beside the current tile's last PV, and the
// current tile's output is stored while the other warpgroup's GEMMs run.
// A warpgroup whose 64 rows of a tile are all padding skips that tile's GEMMs (idle_for).
// GQA head packing (short queries, sched/gqa_pack.h) is a run-time mode of the same kernel: a tile
// then holds several q heads of one KV head (tile row -> head and position through the schedule's
// row maps); only the mask's row positions and the register store of O look at it.
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include "cuda/common/grid_dependency.cuh"
#include "cuda/sm90/fwd/cluster_merge.cuh"
#include "cuda/sm90/fwd/config.h"
#include "cuda/sm90/fwd/mainloop.cuh"
#include "cuda/sm90/fwd/narrow_rows.cuh"
#include "cuda/sm90/fwd/params.h"
#include "cuda/sm90/fwd/producer.cuh"
#include "cuda/sm90/fwd/split_stamps.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/cluster.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"

namespace fastattn::sm90 {

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap to,
               const __grid_constant__ FwdParams p) {
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<FwdSmem<Cfg>*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));

  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  if (threadIdx.x == 0) {
    split_stamp<Cfg>(kStampStart);
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    // q_empty: per consumer warp after the tile's last QK, or per warpgroup after its O store
    const bool tma_out = !Cfg::kSplit && Cfg::kQBuffers == 2 && p.store.out_tma != 0;
    if (tma_out) prefetch_tma_map(&to);
#pragma unroll
    for (int b = 0; b < Cfg::kQBuffers; ++b) {
      mbar_init(&sm.q_full[b], 1);
      mbar_init(&sm.q_empty[b], tma_out ? Cfg::kConsumerWarpgroups : 4 * Cfg::kConsumerWarpgroups);
    }
    // A K/V stage's readers: every consumer warp, or a narrow tile's one warpgroup (alternate stages).
    constexpr int kStageReaders = 4 * (Cfg::kNarrowRows ? 1 : Cfg::kConsumerWarpgroups);
#pragma unroll
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbar_init(&sm.k_full[s], 1);
      mbar_init(&sm.v_full[s], 1);
      mbar_init(&sm.k_empty[s], kStageReaders);
      mbar_init(&sm.v_empty[s], kStageReaders);
    }
    if constexpr (Cfg::kClusterMerge) mbar_init(&sm.merge.full, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  // Cluster merge: the other CTAs push their partials onto merge.full, which must be initialised
  // first. Every thread arrives here (relaxed: the init's fence releases it) and the consumers wait
  // before their stream (below), so before any push; the CTAs of a cluster start together, so the
  // wait is short.
  if constexpr (Cfg::kClusterMerge) cluster_arrive_relaxed();
  if (threadIdx.x == 0) split_stamp<Cfg>(kStampBarrier);
  // Split-KV: the combine that follows (cuda/split_combine.h, early_launch) may be scheduled now;
  // it waits on the device for this grid's partials.
  if constexpr (Cfg::kSplit) cuda_backend::grid_dependents_launch();

  // Both roles walk the same tiles; tiles that see no key load nothing.
  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    split_stamp<Cfg>(kStampRegs);
    PipeState<Cfg::kStages> ps;
    PipeState<Cfg::kQBuffers> qs;
    TileWalk<Cfg> walk;
    while (walk.next(p)) {
      if (!walk.t.sees_keys()) continue;
      produce<Cfg>(sm, walk.t, &tq, &tk, &tv, ps, qs, p.kv, p.blocks);
      qs.advance();
    }
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kClusterMerge) {
      cluster_wait();
      if (warp == 4) announce_merge_bytes<Cfg>(sm, p);  // the first consumer warp
    }
    if constexpr (Cfg::kNarrowRows)
      consume_narrow<T, Cfg>(sm, p, warp / 4 - 1);
    else
      consume<T, Cfg>(sm, p, &to, warp / 4 - 1);
    if (threadIdx.x % 128 == 0) tma_store_wait_all();  // the O stores have left smem and landed
    // Cluster-merge configs merge their splits in the cluster (cluster_merge.cuh): the partials
    // were pushed by the epilogue; the producer warpgroup has no part in it.
    if constexpr (Cfg::kClusterMerge) cluster_merge<T, Cfg>(sm, p);
  }
}

}  // namespace fastattn::sm90
