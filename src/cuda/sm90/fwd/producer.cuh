// The producer warp of the Hopper forward: Q of each tile, then its K and V blocks through the
// smem ring by TMA, in the tile's block-source order.
#pragma once

#include <cuda.h>

#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/tma.cuh"

namespace fastattn::sm90 {

// Producer, one tile: Q into its buffer (once the consumers are done with the tile that used it
// before), then K and V of each visible KV tile, last first (the partial ones come first, so
// masking work overlaps with the later full tiles). `ps` and `qs` carry the ring and Q-buffer
// state from tile to tile.
template <class Cfg>
__device__ __forceinline__ void produce(FwdSmem<Cfg>& sm, const FwdTile& t, const CUtensorMap* tq,
                                        const CUtensorMap* tk, const CUtensorMap* tv,
                                        PipeState<Cfg::kStages>& ps, const PipeState<Cfg::kQBuffers>& qs) {
  mbar_wait(&sm.q_empty[qs.stage()], qs.phase() ^ 1);
  mbar_expect_tx(&sm.q_full[qs.stage()], Cfg::kQBytes);
#pragma unroll
  for (int a = 0; a < Cfg::kAtoms; ++a)
    tma_load_4d(sm.q[qs.stage()] + a * Cfg::kQAtomBytes, tq, a * kAtomCols, t.seq.q_offset + t.m0, t.head,
                t.seq.batch_coord, &sm.q_full[qs.stage()]);
  // One K or V tile into ring slot `stage`, once the consumers have released that slot.
  auto load_tile = [&](const CUtensorMap* map, uint8_t* dst, uint64_t* empty, uint64_t* full, uint32_t phase,
                       int row) {
    mbar_wait(empty, phase ^ 1);
    mbar_expect_tx(full, Cfg::kAtoms * Cfg::kKVAtomBytes);
#pragma unroll
    for (int a = 0; a < Cfg::kAtoms; ++a)
      tma_load_4d(dst + a * Cfg::kKVAtomBytes, map, a * kAtomCols, row, t.kv_head, t.seq.batch_coord, full);
  };
  // K runs one block ahead of V (FA3's order): K(n - 1) waits only for QK(n + 1) to free its slot,
  // not behind V(n), whose slot frees later (after PV(n + 2)). Both rings advance once per block,
  // so K(n) and V(n) share a stage index, as the consumers expect.
  const cuda_backend::BlockRange b = t.blocks;  // a copy: through a reference ptxas ordered the coordinates' moves apart
  auto row_of = [&](int it) { return t.seq.k_offset + b.block(it) * Cfg::kBlockN; };
  PipeState<Cfg::kStages> pk = ps;
  load_tile(tk, sm.k[pk.stage()], &sm.k_empty[pk.stage()], &sm.k_full[pk.stage()], pk.phase(), row_of(b.first()));
  pk.advance();
  for (int it = b.first(); !b.done(it); it = b.next(it), ps.advance()) {
    if (b.has_next(it)) {
      load_tile(tk, sm.k[pk.stage()], &sm.k_empty[pk.stage()], &sm.k_full[pk.stage()], pk.phase(), row_of(b.next(it)));
      pk.advance();
    }
    load_tile(tv, sm.v[ps.stage()], &sm.v_empty[ps.stage()], &sm.v_full[ps.stage()], ps.phase(), row_of(it));
  }
}

}  // namespace fastattn::sm90
