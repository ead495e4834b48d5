// Narrow split tiles (Cfg::kNarrowRows): a decode tile whose stored rows all lie in its first 8 (GQA-packed
// s_q x heads <= 8, or unpacked s_q <= 8 whose rows start at tile row 0; the rule: sched/split_plan.h
// narrow_rows_fit) runs with the operands swapped, so that the keys are the wgmma's M and the 8 query rows its N:
//   S^T = K Q^T        m64 n8 k16 over d   (A = this warpgroup's 64-key K tile; B = Q's rows 0-7)
//   column max over the 64 keys (lane shuffles, then the 4 warps through smem), P^T = exp2(...) -> smem
//   O^T += V^T P^T     m64 n8 k16 over the 64 keys, for each 64-row atom of d (A = the V tile read transposed)
// The 4 real rows of a GQA-4 decode padded to the 64-row M of the usual tile cost 16 x their work; here a
// 64-key block costs 16 HGMMA.64x8x16, and the CTA streams K / V at the ring's rate instead of the tensor
// cores' (bench/proto/swapab_decode_probe.cu; docs/notes/inference.md, session 53).
// The tile is 64 keys deep with a 4-stage ring (NarrowBase, fwd/launch_split.cuh), and the two consumer
// warpgroups take alternate blocks, each with its own softmax state over its blocks; the two merge once, at
// the tile's end, through smem. (Both warpgroups on the 64-key halves of a 2-stage ring of 128-key blocks
// streamed 7 % slower in the probe: a stage is refilled only when both are done with it.) Then the first
// warpgroup hands the merged rows to the usual epilogue (store_rows: the split partials, or the cluster
// merge's pushes) as a 64-row fragment whose rows past 8 are never stored. The producer is the usual one: it
// loads Q's whole 128-row box, of which the QK reads rows 0-7; rows 64-127 of Q's first atom are this tile's
// scratch once q_full has passed.
#pragma once

#include <cfloat>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>

#include "cuda/common/online_softmax.cuh"
#include "cuda/common/softcap.cuh"
#include "cuda/sm90/fwd/config.h"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/split_stamps.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/barriers.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

constexpr int kNarrowRows = 8;  // the query rows of a narrow tile: the wgmma's N

// A narrow tile's scratch: rows 64-127 of its Q buffer's first atom (8 KB), which the QK never reads.
template <class Cfg>
struct NarrowScratch {
  alignas(1024) uint8_t pt[2][kNarrowRows * kAtomRowBytes];  // each warpgroup's P^T: 8 rows x 64 keys, swizzled
  float max[2][2][4][kNarrowRows];                            // [wg][step parity][warp][row]: the warps' maxima
  float sum[2][4][kNarrowRows];                               // [wg][warp][row]: the warps' row sums, at the end
  float o_t[Cfg::kHeadDimV][kNarrowRows];                     // warpgroup 1's O^T, then the merged O^T
  float m1[kNarrowRows], l1[kNarrowRows];                     // warpgroup 1's max and sum
  float m[kNarrowRows], l[kNarrowRows];                       // the merged ones
};

template <class Cfg>
__device__ __forceinline__ NarrowScratch<Cfg>& narrow_scratch(uint8_t* q_buffer) {
  static_assert(sizeof(NarrowScratch<Cfg>) <= 64 * kAtomRowBytes, "the scratch fits rows 64-127 of Q's first atom");
  static_assert(Cfg::kBlockM >= 128, "Q's first atom has 128 rows");
  return *reinterpret_cast<NarrowScratch<Cfg>*>(q_buffer + 64 * kAtomRowBytes);
}

template <class T>
__device__ __forceinline__ uint16_t narrow_bits(float x) {
  if constexpr (std::is_same_v<T, __half>)
    return __half_as_ushort(__float2half_rn(x));
  else
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <class T, class Cfg>
__device__ __forceinline__ void consume_narrow(FwdSmem<Cfg>& sm, const FwdParams& p, int wg) {
  constexpr int D = Cfg::kHeadDim, DV = Cfg::kHeadDimV, N = Cfg::kBlockN;
  static_assert(N == 64, "a block is one wgmma's M");
  // Alternate blocks on an even ring: within a tile each stage keeps one reader, so neither warpgroup waits on a
  // stage's phase while the other still holds the phase before it. Across tiles (one of an odd block count) a
  // stage may change reader; the merge barrier (kNarrowMergeBar, a sync for both) at every keyed tile's end is
  // what keeps the new reader behind the old one's last wait there: it must stay a sync on both sides.
  static_assert(Cfg::kConsumerWarpgroups == 2 && Cfg::kStages % 2 == 0 && Cfg::kSplit && !Cfg::kPageHalves &&
                    !Cfg::kBias && !Cfg::kBlockList,
                "narrow tiles: two warpgroups on alternate stages of an even ring");
  constexpr bool kCM = Cfg::kClusterMerge;

  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  // The m64 n8 fragment: rows (keys, or d in O^T) r0 and r0 + 8, columns (query rows) c0 and c0 + 1.
  const int r0 = 16 * warp + lane / 4, c0 = 2 * (lane % 4);
  // The usual 64-row fragment's coordinates, for the epilogue.
  const int row_in_tile = wg * 64 + warp * 16 + lane / 4, quad_col = lane % 4;
  const int bar = kNarrowBar + wg;
  auto release = [&](uint64_t* b) {
    __syncwarp();
    if (lane == 0) mbar_arrive(b);
  };

  PipeState<Cfg::kStages> ps;
  PipeState<Cfg::kQBuffers> qs;
  TileWalk<Cfg> walk;
  while (walk.next(p)) {
    const FwdTileFor<Cfg>& tile = walk.t;
    if (!tile.sees_keys()) {  // no key in this split: zero rows, lse -inf (the producer loads nothing)
      float zero[DV / 2] = {}, inv[2] = {0.f, 0.f}, lse[2] = {-INFINITY, -INFINITY};
      store_rows<T, Cfg>(sm, p, tile, row_in_tile, quad_col, zero, inv, lse);
      continue;
    }
    uint8_t* q_buffer = sm.q[qs.stage()];
    NarrowScratch<Cfg>& scr = narrow_scratch<Cfg>(q_buffer);
    const uint32_t q_lo = desc_k_major_lo<kCM>(q_buffer);
    const uint32_t pt_lo = desc_k_major_lo<kCM>(scr.pt[wg]);
    mbar_wait(&sm.q_full[qs.stage()], qs.phase());

    // Running max (scaled, -FLT_MAX while nothing is kept, as OnlineSoftmax) and this thread's share of
    // the sum, for columns c0 and c0 + 1; O^T rows 64 h + r0 (+ 8) of those columns.
    float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.f, 0.f};
    float o[DV / 64][4];
#pragma unroll
    for (int h = 0; h < DV / 64; ++h) o[h][0] = o[h][1] = o[h][2] = o[h][3] = 0.f;
    int parity = 0, walked = 0;
    for (int n = tile.blocks.first(); !tile.blocks.done(n); n = tile.blocks.next(n), ++walked, ps.advance()) {
      if ((walked & 1) != wg) continue;  // the other warpgroup's block
      const int stage = ps.stage(), key0 = tile.blocks.block(n) * N;
      mbar_wait(&sm.k_full[stage], ps.phase());
      if (threadIdx.x == 128 && n == tile.blocks.first()) split_stamp<Cfg>(kStampFirstK);  // stamp builds only
      float s[4];
      const uint32_t k_lo = desc_k_major_lo<kCM>(sm.k[stage]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        WgmmaSS<T, kNarrowRows>::run(s, desc_k_major(k_lo, Cfg::kKVAtomBytes, kk),
                                     desc_k_major(q_lo, Cfg::kQAtomBytes, kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(s);
      release(&sm.k_empty[stage]);
      // s[i]: key key0 + r0 + 8 (i / 2), query row c0 + i % 2.
      if (p.attn.softcap != 0.f) {
#pragma unroll
        for (int i = 0; i < 4; ++i) s[i] = cuda_backend::softcap_score(s[i], p.attn.softcap, p.attn.softcap_in);
      }
      if (!tile.blocks.full(n)) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = key0 + r0 + 8 * (i / 2), pos = tile.m0 + ((c0 + i % 2) & p.sched.row_pos_mask);
          if (key < tile.mask.lo(pos) || key >= tile.mask.hi(pos)) s[i] = -INFINITY;
        }
      }
      float bm[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[e] *= p.attn.scale_log2;
        s[e + 2] *= p.attn.scale_log2;
        bm[e] = fmaxf(s[e], s[e + 2]);
#pragma unroll
        for (int x = 4; x < 32; x <<= 1) bm[e] = fmaxf(bm[e], __shfl_xor_sync(~0u, bm[e], x));
      }
      float (&slot)[4][kNarrowRows] = scr.max[wg][parity];
      if (lane < 4) {
        slot[warp][c0] = bm[0];
        slot[warp][c0 + 1] = bm[1];
      }
      named_bar_sync(bar, 128);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = c0 + e;
        const float m_new = fmaxf(m[e], fmaxf(fmaxf(slot[0][c], slot[1][c]), fmaxf(slot[2][c], slot[3][c])));
        const float alpha = cuda_backend::fast_exp2(m[e] - m_new);
        m[e] = m_new;
        s[e] = cuda_backend::fast_exp2(s[e] - m_new);
        s[e + 2] = cuda_backend::fast_exp2(s[e + 2] - m_new);
        l[e] = l[e] * alpha + s[e] + s[e + 2];
#pragma unroll
        for (int h = 0; h < DV / 64; ++h) {
          o[h][e] *= alpha;
          o[h][e + 2] *= alpha;
        }
      }
      // P^T: row c, key k at k's 16-byte chunk XOR c (128-byte swizzle), the PVs' B operand. This warpgroup's
      // previous block's PVs have read it: each of its warps waited for them before the barrier above.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int c = c0 + i % 2, k = r0 + 8 * (i / 2);
        const uint32_t at = smem_addr(scr.pt[wg]) + c * kAtomRowBytes + ((((k * 2) >> 4) ^ c) << 4) + (k * 2 & 15);
        asm volatile("st.shared.u16 [%0], %1;" ::"r"(at), "h"(narrow_bits<T>(s[i])) : "memory");
      }
      fence_smem_for_tma();  // generic writes read by the async proxy (wgmma)
      named_bar_sync(bar, 128);
      mbar_wait(&sm.v_full[stage], ps.phase());
      // V's rows past the sequence's last key may hold NaN (zero_v_rows_from): P = 0 there, 0 x NaN is not.
      const int first_past = tile.seq.len_k - tile.blocks.block(n) * N;
      if (first_past < N) zero_v_rows_from<Cfg>(sm, stage, first_past, bar);
      wgmma_fence();
#pragma unroll
      for (int h = 0; h < DV / 64; ++h) {
        const uint32_t v_lo = desc_n_major_lo<kCM>(sm.v[stage] + h * Cfg::kKVAtomBytes, Cfg::kKVAtomBytes);
#pragma unroll
        for (int kk = 0; kk < N / 16; ++kk)
          WgmmaSS<T, kNarrowRows, Major::MN, Major::K>::run(o[h], desc_mn_major(v_lo, kk),
                                                            desc_k_major(pt_lo, kAtomRowBytes * kNarrowRows, kk), 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int h = 0; h < DV / 64; ++h) fence_operands(o[h]);
      release(&sm.v_empty[stage]);
      parity ^= 1;
    }

    if (threadIdx.x == 128) split_stamp<Cfg>(kStampLastPv);
    // The sums over the warpgroup: the lanes of a column, then its 4 warps.
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) l[e] += __shfl_xor_sync(~0u, l[e], x);
    if (lane < 4) {
      scr.sum[wg][warp][c0] = l[0];
      scr.sum[wg][warp][c0 + 1] = l[1];
    }
    named_bar_sync(bar, 128);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = c0 + e;
      l[e] = scr.sum[wg][0][c] + scr.sum[wg][1][c] + scr.sum[wg][2][c] + scr.sum[wg][3][c];
    }
    // Warpgroup 1 hands its state to warpgroup 0, which merges (each O^T element read and rewritten by
    // the thread that holds it) and stores the rows.
    if (wg == 1) {
#pragma unroll
      for (int h = 0; h < DV / 64; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) scr.o_t[64 * h + r0 + 8 * (i / 2)][c0 + i % 2] = o[h][i];
      if (t < 4) {
        scr.m1[c0] = m[0];
        scr.m1[c0 + 1] = m[1];
        scr.l1[c0] = l[0];
        scr.l1[c0 + 1] = l[1];
      }
    }
    named_bar_sync(kNarrowMergeBar, 256);
    if (wg == 0) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = c0 + e;
        const float m1 = scr.m1[c], mm = fmaxf(m[e], m1);
        const float w0 = cuda_backend::fast_exp2(m[e] - mm), w1 = cuda_backend::fast_exp2(m1 - mm);
#pragma unroll
        for (int h = 0; h < DV / 64; ++h)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            float& x = scr.o_t[64 * h + r0 + 8 * r][c];
            x = o[h][2 * r + e] * w0 + x * w1;
          }
        if (t < 4) {
          scr.m[c] = mm;
          scr.l[c] = l[e] * w0 + scr.l1[c] * w1;
        }
      }
      named_bar_sync(bar, 128);
      // The usual fragment: rows row_in_tile (+ 8), column pairs 8 j + 2 quad_col; real rows in warp 0's first half.
      float frag[DV / 2], inv[2], lse[2];
      const int row = min(row_in_tile, kNarrowRows - 1);
      const bool real = row_in_tile < kNarrowRows;
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        frag[4 * j] = real ? scr.o_t[8 * j + 2 * quad_col][row] : 0.f;
        frag[4 * j + 1] = real ? scr.o_t[8 * j + 2 * quad_col + 1][row] : 0.f;
        frag[4 * j + 2] = frag[4 * j + 3] = 0.f;
      }
      const float sum = real ? scr.l[row] : 0.f;
      inv[0] = sum == 0.f ? 0.f : cuda_backend::fast_rcp(sum);
      lse[0] = sum == 0.f ? -INFINITY : (scr.m[row] + cuda_backend::fast_log2(sum)) * 0.69314718055994531f;
      inv[1] = 0.f;
      lse[1] = -INFINITY;
      store_rows<T, Cfg>(sm, p, tile, row_in_tile, quad_col, frag, inv, lse);
      if (threadIdx.x == 128) split_stamp<Cfg>(kStampStored);
    }
    // The scratch's generic writes before the producer's next TMA load of this buffer (async proxy) overwrites them.
    fence_smem_for_tma();
    release(&sm.q_empty[qs.stage()]);  // the scratch is read: the producer may load the buffer's next tile
    qs.advance();
  }
}

}  // namespace fastattn::sm90
