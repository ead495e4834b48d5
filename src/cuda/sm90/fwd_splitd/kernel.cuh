// The Hopper split-D forward (d_qk, d_v up to 1024; docs/notes/splitd-sm90.md, "(b), the key-split
// kernel"). One CTA: 64 query rows of one (batch, head), a pair of 256-column slices of O (one per
// consumer warpgroup), one producer thread streaming Q once and K / V through one ring of 64 x 64
// atoms (its depth a kernel parameter: Q's unused chunks join it). S is computed once per key block
// of 128: warpgroup w does QK for keys [64 w, 64 w + 64) over the whole d_qk. The row max is
// exchanged through smem (named barrier 1), each warpgroup writes its P half to smem (named barrier
// 2), and O_slice += P_own V_own (RS, P in registers) + P_other V_other (SS, P from smem). The row
// sums are exchanged once, at the end. GQA-packed tiles (decode: 64 rows of several q heads of one
// KV head) and split-KV (a tile's key blocks in shares, fp32 partials merged by split_combine.cu)
// change only the tile's derivation (tile.cuh) and its store (epilogue.cuh).
// The warpgroups run two template instances (kWG 0 / 1), so they meet at every named barrier from
// different instructions: the barriers are PTX's non-aligned form (named_bar_*_unaligned), as
// bar.sync / bar.arrive (.aligned) require every participant to execute the same instruction.
#pragma once

#include "cuda/common/softcap.cuh"
#include "cuda/sm90/fwd_splitd/config.h"
#include "cuda/sm90/fwd_splitd/epilogue.cuh"
#include "cuda/sm90/fwd_splitd/tile.cuh"
#include "cuda/sm90/prim/smem_rows.cuh"

namespace fastattn::sm90 {

struct SplitDSmem {
  using Cfg = SplitDConfig;
  // Q's atoms [0, qk_atoms), then the ring's slots [ring0, ring0 + ring_slots) (SplitDParams).
  alignas(1024) uint8_t chunks[Cfg::kChunks][Cfg::kChunkBytes];
  alignas(1024) uint8_t p[Cfg::kConsumerWarpgroups][Cfg::kChunkBytes];  // P half of warpgroup w (64 x 64 keys)
  float rows[Cfg::kConsumerWarpgroups][Cfg::kRows];  // each block's row max, then the final row sums
  uint64_t q_full;
  uint64_t full[Cfg::kMaxRingSlots], empty[Cfg::kMaxRingSlots];
  // A V chunk holding rows past the keys lands here instead of on full: splitd_hand_over_v zeroes those
  // rows, then arrives at full.
  uint64_t landed[Cfg::kMaxRingSlots];
};

// Shared-memory stores and loads by 32-bit shared address: through the generic pointer into the
// dynamic smem ptxas emitted generic ST.E / LD.E (it cannot prove the address shared).
__device__ __forceinline__ void sts_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void sts_f32(uint32_t addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ float lds_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

// Producer (one thread): Q once, then per key block of 128 the K chunks interleaved by half
// (K[a, keys 0-63], K[a, keys 64-127] for each 64-column atom a of d_qk: both warpgroups advance
// together), then the V chunks quarter by quarter: for quarter q, slice w, half h the 64 x 64 atom
// of V rows (64 h ...) columns (slice w's quarter q). Past d_v (a d_v 320 pair) TMA's zero fill:
// the consumers' PV then has no run-time branch around a wgmma, which made ptxas serialize every
// wgmma of the kernel (C7518). A V chunk with rows past the keys lands on `landed` for the hand-over
// warp (splitd_hand_over_v).
template <bool kPipelined>
__device__ __forceinline__ void splitd_produce(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t,
                                               const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv) {
  using Cfg = SplitDConfig;
  mbar_expect_tx(&sm.q_full, uint32_t(p.qk_atoms * Cfg::kChunkBytes));
  for (int a = 0; a < p.qk_atoms; ++a)
    tma_load_4d(sm.chunks[a], tq, a * kAtomCols, t.seq.q_offset + t.m0, t.head, t.seq.batch_coord, &sm.q_full);
  SplitDRingState ps;
  uint8_t(*const ring)[Cfg::kChunkBytes] = sm.chunks + p.ring0;
  const int k_end = t.seq.k_offset + t.seq.len_k;
  auto load = [&](const CUtensorMap* map, int col, int row, bool past_keys = false) {
    uint64_t* const bar = (past_keys ? sm.landed : sm.full) + ps.stage();
    mbar_wait(&sm.empty[ps.stage()], ps.phase() ^ 1);
    mbar_expect_tx(bar, Cfg::kChunkBytes);
    tma_load_4d(ring[ps.stage()], map, col, row, t.kv_head, t.seq.batch_coord, bar);
    ps.advance(p.ring_slots);
  };
  const int v_col0 = t.pair * Cfg::kPairAtoms * kAtomCols;
  if constexpr (!kPipelined) {
    for (int it = t.blocks.first(); !t.blocks.done(it); it = t.blocks.next(it)) {
      const int row = t.seq.k_offset + it * Cfg::kKeys;
      for (int a = 0; a < p.qk_atoms; ++a) {
        load(tk, a * kAtomCols, row);
        load(tk, a * kAtomCols, row + Cfg::kHalfKeys);
      }
#pragma unroll 1  // (unrolled, its 16 loads' offsets spilled the 24 registers beside the landed select)
      for (int q = 0; q < Cfg::kSliceAtoms; ++q)
        for (int w = 0; w < Cfg::kConsumerWarpgroups; ++w)
          for (int h = 0; h < 2; ++h)
            load(tv, v_col0 + (w * Cfg::kSliceAtoms + q) * kAtomCols, row + h * Cfg::kHalfKeys,
                 row + (h + 1) * Cfg::kHalfKeys > k_end);
    }
  } else {
    // The pipelined consumers multiply K of block n before V of block n - 1: K(first), then per
    // block K(n), V(n - 1), and V(last) at the end.
    auto load_k = [&](int it) {
      const int row = t.seq.k_offset + it * Cfg::kKeys;
      for (int a = 0; a < p.qk_atoms; ++a) {
        load(tk, a * kAtomCols, row);
        load(tk, a * kAtomCols, row + Cfg::kHalfKeys);
      }
    };
    auto load_v = [&](int it) {
      const int row = t.seq.k_offset + it * Cfg::kKeys;
#pragma unroll 1  // (unrolled, its 16 loads' offsets spilled the 24 registers beside the landed select)
      for (int q = 0; q < Cfg::kSliceAtoms; ++q)
        for (int w = 0; w < Cfg::kConsumerWarpgroups; ++w)
          for (int h = 0; h < 2; ++h)
            load(tv, v_col0 + (w * Cfg::kSliceAtoms + q) * kAtomCols, row + h * Cfg::kHalfKeys,
                 row + (h + 1) * Cfg::kHalfKeys > k_end);
    };
    int prev = t.blocks.first();
    load_k(prev);
    for (int it = t.blocks.next(prev); !t.blocks.done(it); it = t.blocks.next(it)) {
      load_k(it);
      load_v(prev);
      prev = it;
    }
    load_v(prev);
  }
}

// Between the producer and the consumers (warps 1-3 of the producer warpgroup, idle otherwise; ring
// slot s to warp 1 + s % 3, so that three chunks are zeroed at once): each V chunk with rows past the
// keys has them zeroed before its consumer's wgmma reads it (landed -> full): whatever lies there (an
// uninitialised cache, NaN) would reach O through P = 0 times it. K's rows need nothing
// (their scores are masked by a select). The consumers cannot do it: a run-time branch among the PV wgmmas
// serializes them (C7518). Only the walk's first block (the sequence's last, when the tile reaches it) can
// hold such rows; its V chunks follow its K chunks in the ring, and K(second) too when pipelined
// (splitd_produce). A landed barrier completes only for these chunks: its phase is kept here (bit s).
template <bool kPipelined>
__device__ __forceinline__ void splitd_hand_over_v(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t) {
  using Cfg = SplitDConfig;
  static_assert(Cfg::kMaxRingSlots <= 32, "one phase bit a slot");
  const int it = t.blocks.first();
  const int keys_left = t.seq.len_k - it * Cfg::kKeys;  // the block's keys before the end
  if (keys_left >= Cfg::kKeys) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 - 1;  // 0..2
  const uint32_t ring = smem_addr(sm.chunks[p.ring0]);
  // The ring slot of the block's first V chunk (one division here: the 24 registers of the producer
  // warpgroup held no division in the loop without spilling).
  int s = 2 * p.qk_atoms * (kPipelined && t.blocks.has_next(it) ? 2 : 1) % p.ring_slots;
  uint32_t phases = 0;
#pragma unroll 1
  for (int j = 0; j < 2 * Cfg::kPairAtoms; ++j, s = s + 1 == p.ring_slots ? 0 : s + 1) {  // quarter, slice, half
    const int key = (j % 2) * Cfg::kHalfKeys;
    if (key + Cfg::kHalfKeys <= keys_left) continue;
    const uint32_t phase = (phases >> s) & 1u;
    phases ^= 1u << s;
    // By slot, not by chunk: at d_qk >= 704 (ring_slots < 16) a slot lands two of these chunks, and a
    // parity wait is exact only one phase behind: another warp's wait for the second landing would pass
    // while the first is pending, and a later wait for the first could block on a third that never comes.
    if (s % 3 != warp) continue;
    hand_over_rows<Cfg::kHalfKeys, 1>(&sm.landed[s], phase, &sm.full[s],
                                      [&] { return ring + uint32_t(s) * Cfg::kChunkBytes; }, Cfg::kChunkBytes, true,
                                      max(0, keys_left - key), lane);
  }
}

// O_slice += P V of one quarter q of a block, for both schedules. Ring order per quarter: (slice 0:
// half 0, half 1), (slice 1: half 0, half 1); the other warpgroup's two chunks are skipped. under()
// runs while the quarter's group is in flight; then quarter q - 1's group is waited for and its two
// slots go back. splitd_pv_finish waits for the last quarter and releases its slots.
template <class T, int wg, class Skip, class Release, class Under>
__device__ __forceinline__ void splitd_pv_quarter(SplitDSmem& sm, uint8_t (*ring)[SplitDConfig::kChunkBytes],
                                                  int ring_slots, SplitDRingState& ps, int q,
                                                  float (&o)[SplitDConfig::kSliceAtoms][32],
                                                  uint32_t (&pf)[SplitDConfig::kHalfKeys / 16][4], uint32_t p_other_lo,
                                                  int (&cur)[2], int (&prev)[2], Skip& skip, Release& release,
                                                  Under&& under) {
  using Cfg = SplitDConfig;
  constexpr int N = Cfg::kHalfKeys;
#pragma unroll
  for (int w = 0; w < Cfg::kConsumerWarpgroups; ++w) {
    if (w != wg) {
      skip();
      skip();
      continue;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mbar_wait(&sm.full[ps.stage()], ps.phase());
      cur[h] = ps.stage();
      ps.advance(ring_slots);
    }
    const uint32_t v_own = desc_n_major_lo(ring[cur[wg]], Cfg::kChunkBytes);
    const uint32_t v_other = desc_n_major_lo(ring[cur[1 - wg]], Cfg::kChunkBytes);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) WgmmaRS<T, 64>::run(o[q], pf[kk], desc_n_major(v_own, kk), 1);
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
      WgmmaSS<T, 64, Major::K, Major::MN>::run(o[q], desc_k_major(p_other_lo, Cfg::kChunkBytes, kk),
                                               desc_n_major(v_other, kk), 1);
    wgmma_commit();
    under();
    if (q > 0) {
      wgmma_wait<1>();
      release(prev[0]);
      release(prev[1]);
    }
    prev[0] = cur[0];
    prev[1] = cur[1];
  }
}
template <class Release>
__device__ __forceinline__ void splitd_pv_finish(float (&o)[SplitDConfig::kSliceAtoms][32],
                                                 uint32_t (&pf)[SplitDConfig::kHalfKeys / 16][4], int (&prev)[2],
                                                 Release& release) {
  wgmma_wait<0>();
#pragma unroll
  for (int q = 0; q < SplitDConfig::kSliceAtoms; ++q) fence_operands(o[q]);
#pragma unroll
  for (int kk = 0; kk < SplitDConfig::kHalfKeys / 16; ++kk) fence_operands(pf[kk]);  // P is rewritten next block
  release(prev[0]);
  release(prev[1]);
}

// The epilogue of both consumers: O normalised by the row sums (already exchanged) and stored from
// registers (epilogue.cuh): into out, or as this split's fp32 partials under split-KV.
template <class T, int wg>
__device__ __forceinline__ void splitd_store(float (&o)[SplitDConfig::kSliceAtoms][32],
                                             cuda_backend::OnlineSoftmax<SplitDConfig::kHalfKeys>& softmax,
                                             const SplitDParams& p, const SplitDTile& t, int row_in_tile,
                                             int quad_col) {
  float inv[2], lse[2];
  softmax.finish(inv, lse);
  if (p.splits > 1)
    splitd_store_partial<wg>(p, t, row_in_tile, quad_col, o, inv, lse);
  else
    splitd_store_out<T, wg>(p, t, row_in_tile, quad_col, o, inv, lse);
}

// One consumer warpgroup (kWG 0 or 1): keys [64 kWG, + 64) of each block for S, slice kWG of the pair
// for O. Compile-time kWG: which ring positions it multiplies and which it only releases is fixed.
// The row sums and the store: each warpgroup's quad sum through smem (the rows buffer's last reads, the other
// warpgroup's max of the last block, came before the last named barrier 2), own + other in both (the same bits),
// left in quad column 0 so that finish()'s quad sum returns it exactly.
template <class T, int kWG, class Softmax>
__device__ __forceinline__ void splitd_sum_and_store(float (&o)[SplitDConfig::kSliceAtoms][32], Softmax& softmax,
                                                     const SplitDParams& p, const SplitDTile& t, int row_in_tile,
                                                     int quad_col, uint32_t rows_own, uint32_t rows_other) {
  float own[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    own[h] = cuda_backend::quad_sum(softmax.row_sum[h]);
    if (quad_col == 0) sts_f32(rows_own + 32 * h, own[h]);
  }
  named_bar_sync_unaligned(3, SplitDConfig::kConsumerThreads);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = own[h] + lds_f32(rows_other + 32 * h);
    softmax.row_sum[h] = quad_col == 0 ? total : 0.f;
  }
  splitd_store<T, kWG>(o, softmax, p, t, row_in_tile, quad_col);
}

// Softcap, the mask on partial blocks (warpgroup kWG's half of block `it`: its N keys start at it x kKeys + kWG x
// N) and the block's row max over both halves: each warpgroup's quad max through smem (named barrier 1), then
// max(own, other), the same bits in both (fmaxf commutes), so that the running max, alpha and OnlineSoftmax's
// slack rule move alike in both warpgroups. after_max(h): the caller's work on row half h once its max moved.
template <int kWG, int N, class Softmax, class AfterMax>
__device__ __forceinline__ void splitd_block_max(float (&s)[N / 2], const SplitDParams& p, const SplitDTile& t, int it,
                                                 int row_in_tile, int quad_col, uint32_t rows_own, uint32_t rows_other,
                                                 Softmax& softmax, float (&alpha)[2], AfterMax after_max) {
  if (p.attn.softcap != 0.f) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s[i] = cuda_backend::softcap_score(s[i], p.attn.softcap, p.attn.softcap_in);
  }
  if (!t.blocks.full(it)) {
    // GQA packing: a tile row's query position is its low bits (row_pos_mask; 63 unpacked).
    const int row0 = t.m0 + (row_in_tile & p.row_pos_mask), row1 = t.m0 + ((row_in_tile + 8) & p.row_pos_mask);
    const int n0 = it * SplitDConfig::kKeys + kWG * N;
    cuda_backend::apply_keep_bits<N, 0>(s, cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col));
    cuda_backend::apply_keep_bits<N, 1>(s, cuda_backend::keep_bits<N>(t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col));
  }
  float m[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float x = -INFINITY;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) x = fmaxf(x, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    m[h] = cuda_backend::quad_max(x);
    if (quad_col == 0) sts_f32(rows_own + 32 * h, m[h]);
  }
  named_bar_sync_unaligned(1, SplitDConfig::kConsumerThreads);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m[h] = fmaxf(m[h], lds_f32(rows_other + 32 * h));
    softmax.take_max(h, m[h], p.attn.scale_log2, alpha);
    after_max(h);
  }
}

template <class T, int kWG>
__device__ __forceinline__ void splitd_consume(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t) {
  using Cfg = SplitDConfig;
  constexpr int wg = kWG;
  constexpr int N = Cfg::kHalfKeys;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4;
  const int row_in_tile = warp_in_wg * 16 + lane / 4;  // this thread's rows: +0 and +8
  float o[Cfg::kSliceAtoms][32];
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
#pragma unroll
  for (int q = 0; q < Cfg::kSliceAtoms; ++q)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[q][i] = 0.f;
  auto release = [&](int slot) {  // per warp, once its wgmma reads of the slot are done
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.empty[slot]);
  };
  SplitDRingState ps;
  uint8_t(*const ring)[Cfg::kChunkBytes] = sm.chunks + p.ring0;
  // The other warpgroup's chunk at this ring position: waited for (every slot takes both
  // warpgroups' arrivals, each after the slot was filled) and released untouched.
  auto skip = [&]() {
    mbar_wait(&sm.full[ps.stage()], ps.phase());
    release(ps.stage());
    ps.advance(p.ring_slots);
  };
  if (!t.blocks.empty()) mbar_wait(&sm.q_full, 0);
  const uint32_t q_lo = desc_k_major_lo(sm.chunks[0]);
  const uint32_t p_other_lo = desc_k_major_lo(sm.p[1 - wg]);
  const uint32_t p_own = smem_addr(sm.p[wg]);
  // This thread's row-max / row-sum slots (rows +0 and +8): its own warpgroup's, the other's.
  const uint32_t rows_own = smem_addr(&sm.rows[wg][row_in_tile]);
  const uint32_t rows_other = smem_addr(&sm.rows[1 - wg][row_in_tile]);
  for (int it = t.blocks.first(); !t.blocks.done(it); it = t.blocks.next(it)) {
    // S = Q K_own^T: one commit group per K chunk, a chunk's slot released once the group after it
    // is issued and it has retired (at most two own chunks held). Ring order: K[a, half 0], K[a, half 1].
    auto issue_qk_chunk = [&](int a, bool accumulate) {
      mbar_wait(&sm.full[ps.stage()], ps.phase());
      const uint32_t k_lo = desc_k_major_lo(ring[ps.stage()]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        WgmmaSS<T, N>::run(s, desc_k_major(q_lo, Cfg::kChunkBytes, 4 * a + kk), desc_k_major(k_lo, Cfg::kChunkBytes, kk),
                           accumulate || kk > 0);
      wgmma_commit();
    };
    if constexpr (wg == 1) skip();
    issue_qk_chunk(0, false);
    int held = ps.stage();
    ps.advance(p.ring_slots);
    if constexpr (wg == 0) skip();
    for (int a = 1; a < p.qk_atoms; ++a) {
      if constexpr (wg == 1) skip();
      issue_qk_chunk(a, true);
      wgmma_wait<1>();
      release(held);
      held = ps.stage();
      ps.advance(p.ring_slots);
      if constexpr (wg == 0) skip();
    }
    wgmma_wait<0>();
    fence_operands(s);
    release(held);
    splitd_block_max<wg, N>(s, p, t, it, row_in_tile, quad_col, rows_own, rows_other, softmax, alpha,
                            [&](int h) { softmax.exp_row(s, h, p.attn.scale_log2, alpha); });
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int q = 0; q < Cfg::kSliceAtoms; ++q) cuda_backend::scale_rows<64>(o[q], alpha);
    }
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = cuda_backend::pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    // P_own to smem as one 128-byte-swizzled K-major atom (the layout TMA gives Q and K): row r's
    // 16-byte chunk j (columns 8 j .. 8 j + 7) at chunk j ^ (r % 8). This thread's columns
    // 8 j + 2 quad_col (+1) of row half h are pf[j / 2][2 (j % 2) + h]. No barrier guards the rewrite:
    // the other warpgroup's wgmma reads of this buffer (its last block's PV) retired before it
    // reached this block's barrier 1.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row_in_tile + 8 * h;
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        sts_u32(p_own + r * kAtomRowBytes + ((j ^ (r % 8)) << 4) + 4 * quad_col, pf[j / 2][2 * (j % 2) + h]);
    }
    fence_smem_for_tma();  // the generic-proxy stores, before the other warpgroup's wgmma reads them
    named_bar_sync_unaligned(2, Cfg::kConsumerThreads);
    // O_slice += P V, quarter by quarter (splitd_pv_quarter, nothing under it).
    int cur[2], prev[2];
#pragma unroll
    for (int q = 0; q < Cfg::kSliceAtoms; ++q)
      splitd_pv_quarter<T, wg>(sm, ring, p.ring_slots, ps, q, o, pf, p_other_lo, cur, prev, skip, release, [] {});
    splitd_pv_finish(o, pf, prev, release);
  }
  splitd_sum_and_store<T, wg>(o, softmax, p, t, row_in_tile, quad_col, rows_own, rows_other);
}

// The pipelined consumer (docs/notes/splitd-sm90.md, "The softmax under the tensor cores"): PV of
// block n - 1 is issued after block n's row max, so that block n's exps run under it, and block
// n's first QK chunk is issued before block n - 1's O rescale and P store, which run under it. The
// ring brings K(n) before V(n - 1) (splitd_produce<true>). Per block still two named barriers:
// 1 after the row max (the max of n, and both P halves of n - 1 written before it), 2 after PV(n - 1)
// retired in both warpgroups (both P buffers and the row slots may be rewritten after it). O sees
// the same operations in the same order as splitd_consume's (rescale by alpha(n) between PV(n - 1)
// and PV(n)): the same output bits.
template <class T, int kWG>
__device__ __forceinline__ void splitd_consume_pipelined(SplitDSmem& sm, const SplitDParams& p, const SplitDTile& t) {
  using Cfg = SplitDConfig;
  constexpr int wg = kWG;
  constexpr int N = Cfg::kHalfKeys;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4, quad_col = lane % 4;
  const int row_in_tile = warp_in_wg * 16 + lane / 4;  // this thread's rows: +0 and +8
  float o[Cfg::kSliceAtoms][32];
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
#pragma unroll
  for (int q = 0; q < Cfg::kSliceAtoms; ++q)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[q][i] = 0.f;
  auto release = [&](int slot) {  // per warp, once its wgmma reads of the slot are done
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.empty[slot]);
  };
  SplitDRingState ps;
  uint8_t(*const ring)[Cfg::kChunkBytes] = sm.chunks + p.ring0;
  auto skip = [&]() {  // the other warpgroup's chunk at this ring position
    mbar_wait(&sm.full[ps.stage()], ps.phase());
    release(ps.stage());
    ps.advance(p.ring_slots);
  };
  const uint32_t q_lo = desc_k_major_lo(sm.chunks[0]);
  const uint32_t p_other_lo = desc_k_major_lo(sm.p[1 - wg]);
  const uint32_t p_own = smem_addr(sm.p[wg]);
  const uint32_t rows_own = smem_addr(&sm.rows[wg][row_in_tile]);
  const uint32_t rows_other = smem_addr(&sm.rows[1 - wg][row_in_tile]);

  // S = Q K_own^T as in splitd_consume, in two parts: chunk 0 (returns its slot, held until the
  // group after it retired) and the rest, so that other work can run under chunk 0.
  auto issue_qk_chunk = [&](int a, bool accumulate) {
    mbar_wait(&sm.full[ps.stage()], ps.phase());
    const uint32_t k_lo = desc_k_major_lo(ring[ps.stage()]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      WgmmaSS<T, N>::run(s, desc_k_major(q_lo, Cfg::kChunkBytes, 4 * a + kk), desc_k_major(k_lo, Cfg::kChunkBytes, kk),
                         accumulate || kk > 0);
    wgmma_commit();
  };
  auto qk_first = [&]() {
    if constexpr (wg == 1) skip();
    issue_qk_chunk(0, false);
    const int held = ps.stage();
    ps.advance(p.ring_slots);
    if constexpr (wg == 0) skip();
    return held;
  };
  // Chunks 1.. (each chunk's slot released once the group after it is issued and it has retired);
  // returns the last chunk's slot, whose group may still be in flight.
  auto qk_issue_rest = [&](int held) {
    for (int a = 1; a < p.qk_atoms; ++a) {
      if constexpr (wg == 1) skip();
      issue_qk_chunk(a, true);
      wgmma_wait<1>();
      release(held);
      held = ps.stage();
      ps.advance(p.ring_slots);
      if constexpr (wg == 0) skip();
    }
    return held;
  };
  // S complete: the QK group is the oldest in flight, kInFlight groups (PV quarters) after it.
  auto qk_retired = [&](int held, auto in_flight) {
    wgmma_wait<decltype(in_flight)::value>();
    fence_operands(s);
    release(held);
  };
  // Softcap, mask, the block's row max over both halves (named barrier 1) and the running max:
  // alpha. The exps come later (exp_row), with the same inputs as splitd_consume's.
  auto block_max = [&](int it) {
    splitd_block_max<wg, N>(s, p, t, it, row_in_tile, quad_col, rows_own, rows_other, softmax, alpha, [](int) {});
  };
  // P (the exps in s) to the RS operand; pf's last reader, the previous PV, has retired.
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = cuda_backend::pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  };
  auto rescale_o = [&]() {
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int q = 0; q < Cfg::kSliceAtoms; ++q) cuda_backend::scale_rows<64>(o[q], alpha);
    }
  };
  // P_own to smem (the layout of splitd_consume), fenced for the other warpgroup's wgmma reads after
  // the next named barrier.
  auto store_p = [&]() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row_in_tile + 8 * h;
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        sts_u32(p_own + r * kAtomRowBytes + ((j ^ (r % 8)) << 4) + 4 * quad_col, pf[j / 2][2 * (j % 2) + h]);
    }
    fence_smem_for_tma();
  };
  // O_slice += P V of one block, quarter by quarter: pv_quarter(q, under) issues quarter q, runs
  // under() while it is in flight, then waits for quarter q - 1 and releases its slots; pv_finish
  // waits for the last one (both shared with splitd_consume).
  int cur[2], prev[2];
  auto pv_quarter = [&](int q, auto&& under) {
    splitd_pv_quarter<T, wg>(sm, ring, p.ring_slots, ps, q, o, pf, p_other_lo, cur, prev, skip, release, under);
  };
  auto pv_finish = [&]() { splitd_pv_finish(o, pf, prev, release); };
  auto nothing = []() {};
  // P_own of a block written (store_p) -> the other warpgroup may read it: named barrier 4 + w,
  // arrived at by its writer w and waited on by the other (FA3's producer / consumer use of bar.arrive).
  auto p_written = [&]() { named_bar_arrive_unaligned(4 + wg, Cfg::kConsumerThreads); };
  auto p_other_written = [&]() { named_bar_sync_unaligned(4 + (1 - wg), Cfg::kConsumerThreads); };

  if (!t.blocks.empty()) {
    mbar_wait(&sm.q_full, 0);
    // Prologue, block first: S, max, exps (no PV before it to hide them under).
    int it = t.blocks.first();
    qk_retired(qk_issue_rest(qk_first()), std::integral_constant<int, 0>{});
    block_max(it);
    softmax.exp_row(s, 0, p.attn.scale_log2, alpha);
    softmax.exp_row(s, 1, p.attn.scale_log2, alpha);
    named_bar_sync_unaligned(2, Cfg::kConsumerThreads);  // the other's reads of the row slots are done
    for (it = t.blocks.next(it); !t.blocks.done(it); it = t.blocks.next(it)) {
      // Block n - 1's P and O rescale under block n's first QK chunk, then the rest of QK(n).
      pack_p();
      int held = qk_first();
      rescale_o();
      store_p();
      p_written();
      held = qk_issue_rest(held);
      // PV(n - 1)'s first quarter behind QK(n)'s last chunk: block n's mask and row max (named
      // barrier 1) under it, its exps under quarters 1 and 2.
      p_other_written();
      pv_quarter(0, nothing);
      qk_retired(held, std::integral_constant<int, 1>{});
      block_max(it);
      pv_quarter(1, [&]() { softmax.exp_row(s, 0, p.attn.scale_log2, alpha); });
      pv_quarter(2, [&]() { softmax.exp_row(s, 1, p.attn.scale_log2, alpha); });
      pv_quarter(3, nothing);
      pv_finish();
      named_bar_sync_unaligned(2, Cfg::kConsumerThreads);  // both PV(n - 1) retired: P buffers, row slots free
    }
    // Epilogue, block last: its P, the O rescale, and PV once the other's P half is written.
    pack_p();
    rescale_o();
    store_p();
    p_written();
    p_other_written();
#pragma unroll
    for (int q = 0; q < Cfg::kSliceAtoms; ++q) pv_quarter(q, nothing);
    pv_finish();
  }
  splitd_sum_and_store<T, wg>(o, softmax, p, t, row_in_tile, quad_col, rows_own, rows_other);
}

// kPipelined: splitd_consume_pipelined's schedule (the default), else splitd_consume's lockstep one
// (FASTATTN_SPLITD_LOCKSTEP=1, a temporary switch for one device A/B).
template <class T, bool kPipelined>
__global__ void __launch_bounds__(SplitDConfig::kThreads, 1)
    splitd_fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                      const __grid_constant__ CUtensorMap tv, const __grid_constant__ SplitDParams p) {
  using Cfg = SplitDConfig;
  extern __shared__ uint8_t smem_raw[];
  auto& sm = *reinterpret_cast<SplitDSmem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const SplitDTile t = splitd_tile(p);
  if (t.m0 >= t.seq.rows_q) return;  // past this sequence's rows (varlen: a shorter one), whole CTA
  if (threadIdx.x == 0) {
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    mbar_init(&sm.q_full, 1);
#pragma unroll
    for (int s = 0; s < Cfg::kMaxRingSlots; ++s) {
      mbar_init(&sm.full[s], 1);  // the producer's expect_tx, or the hand-over warp's arrival
      mbar_init(&sm.landed[s], 1);
      mbar_init(&sm.empty[s], 4 * Cfg::kConsumerWarpgroups);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    regs_release<Cfg::kProducerRegs>();
    // (else: the producer's loop keeps nothing live for the hand-over; 48-68 bytes spilled with both ifs)
    if (threadIdx.x == 0 && !t.blocks.empty())
      splitd_produce<kPipelined>(sm, p, t, &tq, &tk, &tv);
    else if (threadIdx.x >= 32 && !t.blocks.empty())
      splitd_hand_over_v<kPipelined>(sm, p, t);
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    if constexpr (kPipelined) {
      if (threadIdx.x < 256)
        splitd_consume_pipelined<T, 0>(sm, p, t);
      else
        splitd_consume_pipelined<T, 1>(sm, p, t);
    } else {
      if (threadIdx.x < 256)
        splitd_consume<T, 0>(sm, p, t);
      else
        splitd_consume<T, 1>(sm, p, t);
    }
  }
}

}  // namespace fastattn::sm90
