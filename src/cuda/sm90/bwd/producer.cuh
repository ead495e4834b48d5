// Producer of the Hopper backward: K and V once, then (Q, dO, lse, D) per step through the ring.
#pragma once

#include <cuda.h>

#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/stamps.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/smem_rows.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"  // kAtomCols

namespace fastattn::sm90 {

// The tile's K and V (Cfg::kBlockN rows, all atoms: K's kAtoms, V's kAtomsV) into k / v, completing on `full`.
template <class Cfg, class Tile>
__device__ __forceinline__ void bwd_load_kv(uint8_t* k, uint8_t* v, uint64_t* full, const Tile& t,
                                            const CUtensorMap* tk, const CUtensorMap* tv) {
  static_assert(Cfg::kAtomsV <= Cfg::kAtoms);
  const int kv_row = t.seq.k_offset + t.n0;
  mbar_expect_tx(full, Cfg::kKBytes + Cfg::kVBytes);
#pragma unroll
  for (int a = 0; a < Cfg::kAtoms; ++a) {
    tma_load_4d(k + a * Cfg::kKAtomBytes, tk, a * kAtomCols, kv_row, t.kv_head, t.seq.batch_coord, full);
    if (a < Cfg::kAtomsV)
      tma_load_4d(v + a * Cfg::kKAtomBytes, tv, a * kAtomCols, kv_row, t.kv_head, t.seq.batch_coord, full);
  }
}

// The kernels whose consumers take each step's Q / dO from the hand-over warp (bwd_hand_over_q): d 64's
// deterministic and bitmask kernels, where the consumers' own zeroing (zero_rows.cuh) spilled 4-36 bytes.
template <class Cfg, bool kDet>
constexpr bool bwd_q_handed_over() {
  return Cfg::kHeadDim == 64 && (kDet || Cfg::kBitmask);
}

// With seqused_q, between the producer's loads and the consumers: each step's Q / dO (q_landed -> q_full)
// pass through this warp, which first zeroes the last q-block's rows past seqused_q (zero_rows.cuh says
// why), with a rolled loop (the producer warpgroup's 24 registers).
template <class Cfg, class Tile>
__device__ __forceinline__ void bwd_hand_over_q(BwdSmem<Cfg>& sm, const BwdParams& p, const Tile& t) {
  const int lane = threadIdx.x % 32;
  PipeState<Cfg::kStages> ps;
  int h, m;
  t.first_step(p, h, m);
  for (int i = t.steps(p.attn.q_per_kv); i > 0; --i, ps.advance(), t.next_step(p, h, m)) {
    const int s = ps.stage();
    mbar_wait(&sm.q_landed[s], ps.phase());
    const int q0 = (Tile::kList ? t.q_block(m) : m) * Cfg::kBlockM;
    if (q0 + Cfg::kBlockM > t.seq.len_q) {
      zero_atom_rows_rolled<Cfg::kBlockM, Cfg::kAtoms, 32>(smem_addr(sm.q[s]), Cfg::kQAtomBytes, t.seq.len_q - q0, lane);
      zero_atom_rows_rolled<Cfg::kBlockM, Cfg::kAtomsV, 32>(smem_addr(sm.dout[s]), Cfg::kQAtomBytes, t.seq.len_q - q0,
                                                            lane);
      fence_smem_for_tma();
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.q_full[s]);
  }
}

// A CTA's second tile (kAfterTile, paired key blocks): its first Q / dO stages go out while the
// consumers finish the first tile, its K / V once they have staged the first tile's dK / dV out of
// the K / V tiles (kv_empty, whose phase kv_empty_parity is: the band kernel's later tiles wait for
// its later phases). The ring's pipe state `ps` runs on across the tiles. The loads complete on q_land:
// sm.q_full, or sm.q_landed where a hand-over warp stands between (bwd_hand_over_q).
template <class Cfg, bool kAfterTile, class Tile>
__device__ __forceinline__ void bwd_produce(BwdSmem<Cfg>& sm, const BwdParams& p, const Tile& t,
                                            const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv,
                                            const CUtensorMap* tdo, PipeState<Cfg::kStages>& ps, uint64_t* q_land,
                                            int kv_empty_parity = 0) {
  auto load_kv = [&] {
    if constexpr (kAfterTile) mbar_wait(&sm.kv_empty, kv_empty_parity);
    bwd_load_kv<Cfg>(sm.k, sm.v, &sm.kv_full, t, tk, tv);
  };
  const int steps = t.steps(p.attn.q_per_kv);
  const int kv_at = steps < Cfg::kStages ? steps : Cfg::kStages;  // kAfterTile
  if constexpr (!kAfterTile) load_kv();
  if (kBwdStamps && !kAfterTile) bwd_stamp(kBsKvIssued);
  int h, m;
  t.first_step(p, h, m);
  for (int i = 0; i < steps; ++i, ps.advance(), t.next_step(p, h, m)) {
    if (kAfterTile && i == kv_at) load_kv();
    const int s = ps.stage();
    mbar_wait(&sm.q_empty[s], ps.phase() ^ 1);
    mbar_expect_tx(&q_land[s], Cfg::kQBytes + Cfg::kDoBytes + 2 * Cfg::kBlockM * 4);
    int q_row;
    if constexpr (Tile::kList)
      q_row = t.seq.q_offset + t.q_block(m) * Cfg::kBlockM;
    else
      q_row = t.seq.q_offset + m * Cfg::kBlockM;
#pragma unroll
    for (int a = 0; a < Cfg::kAtoms; ++a) {  // dO: its kAtomsV atoms (d_v), in the same order as Q's
      tma_load_4d(sm.q[s] + a * Cfg::kQAtomBytes, tq, a * kAtomCols, q_row, h, t.seq.batch_coord, &q_land[s]);
      if (a < Cfg::kAtomsV)
        tma_load_4d(sm.dout[s] + a * Cfg::kQAtomBytes, tdo, a * kAtomCols, q_row, h, t.seq.batch_coord, &q_land[s]);
    }
    const int64_t ws = t.template ws_row<Cfg::kBlockM>(p, h, m);
    bulk_load(sm.lse[s], p.lse_log2 + ws, Cfg::kBlockM * 4, &q_land[s]);
    bulk_load(sm.dpsum[s], p.dpsum + ws, Cfg::kBlockM * 4, &q_land[s]);
    if (kBwdStamps && !kAfterTile) bwd_stamp_step(kBsQIssued, i);
  }
  if (kAfterTile && kv_at == steps) load_kv();
}

}  // namespace fastattn::sm90
