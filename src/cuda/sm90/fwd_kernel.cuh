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
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/ptx>
#include <type_traits>

#include "cuda/common/online_softmax.cuh"
#include "cuda/common/quad_transpose.cuh"
#include "cuda/common/seqlen.cuh"
#include "cuda/sched/tile_order.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/prof/loop_probes.cuh"
#include "cuda/sm90/fwd_config.h"
#include "cuda/sm90/fwd/params.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

constexpr int kPingPongBar = 1;  // named barriers 1..3, one per consumer warpgroup (0 is __syncthreads)
constexpr int kStoreBar = 4;     // 4..6: a warpgroup's O rows are in smem, ready for the TMA store

template <class Cfg>
struct FwdSmem {
  alignas(1024) uint8_t q[Cfg::kQBuffers][Cfg::kQBytes];
  alignas(1024) uint8_t k[Cfg::kStages][Cfg::kAtoms * Cfg::kKVAtomBytes];
  alignas(1024) uint8_t v[Cfg::kStages][Cfg::kAtoms * Cfg::kKVAtomBytes];
  // q_empty: both consumer warpgroups issued (and waited for) their last QK of that buffer's tile
  uint64_t q_full[Cfg::kQBuffers], q_empty[Cfg::kQBuffers];
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

// The tile being worked on: which sequence, head and query rows, and which KV blocks it visits.
// Packed (GQA, sched/gqa_pack.h): `head` is the first of the tile's q heads, m0 = 0 and [m0, m1)
// the query positions that all its heads share.
struct FwdTile {
  cuda_backend::SeqInfo seq;
  cuda_backend::WindowMask mask;
  int head, kv_head, m0, m1;
  cuda_backend::BlockRange blocks;  // its key blocks, walked last first (mask/block_source.cuh)
  __device__ __forceinline__ bool sees_keys() const { return blocks.end > blocks.begin; }
};

// With TileSchedule::first_block_pad a sequence's padding rows (rows_q not a multiple of kBlockM) sit
// in its first m-block, whose m0 is then negative: Q rows above the sequence come in as TMA zero
// fill or another sequence's rows, are masked like any row, and are never stored.
template <class Cfg>
__device__ __forceinline__ FwdTile make_tile(const FwdParams& p, int id) {
  const cuda_backend::TileCoord c = cuda_backend::tile_coord(p.sched, p.sched.div, p.attn, id);
  cuda_backend::SeqInfo seq(p.attn, c.batch);
  cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, p.attn.window_left, p.attn.window_right};
  const int pad = p.sched.first_block_pad >= 0 ? p.sched.first_block_pad
                                               : (Cfg::kBlockM - seq.rows_q % Cfg::kBlockM) % Cfg::kBlockM;
  FwdTile t{seq, mask, c.head, c.kv_head, c.m_block * Cfg::kBlockM - pad, 0, {}};
  t.m1 = min(t.m0 + Cfg::kBlockM, seq.len_q);  // rows [m1, rows_q) are only zero-filled
  if (t.m0 < t.m1) t.blocks = cuda_backend::key_blocks(mask, t.m0, t.m1, Cfg::kBlockN);
  return t;
}

// A tile is idle for consumer warpgroup wg when none of its 64 rows is stored: all past the
// sequence's end or above its start (first_block_pad; d = 64's 192-row tiles at s = 1024 or 4096
// leave two of three warpgroups so). Unpacked tiles only (a packed tile's rows are several
// heads'). Such a warpgroup computes the tile's first block of the stream only (consume's
// first_block) and skips the others (skip_idle_blocks): one QK and one PV instead of a GEMM pair
// per block, so the tensor cores run the working warpgroups' GEMMs alone (pass 27, H100 A/B
// 2026-11-22: d = 64 unmasked s 4k 1.024-1.027, 8k 1.030-1.036; docs/notes/fwd-sm90.md).
__device__ __forceinline__ bool idle_for(const FwdParams& p, const FwdTile& t, int wg) {
  const int r0 = t.m0 + 64 * wg;
  return p.sched.pack_heads == 1 && (r0 >= t.seq.rows_q || r0 + 64 <= 0);
}

// This CTA's tiles of the persistent schedule (sched/tile_order.cuh), in order, skipping those
// past their sequence's end. Producer and consumers walk it alike.
struct TileWalk {
  int round = 0, id = 0;
  FwdTile t;

  template <class Cfg>
  __device__ __forceinline__ bool next(const FwdParams& p) {
    for (; round * cuda_backend::cta_count() < p.sched.tiles;) {
      id = cuda_backend::tile_of_round(round++, cuda_backend::cta_index(), cuda_backend::cta_count());
      if (id >= p.sched.tiles) continue;
      t = make_tile<Cfg>(p, id);
      if (t.m0 < t.seq.rows_q) return true;
    }
    return false;
  }
};

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

// One warpgroup's 64 rows of tile `e`: O normalised by inv and LSE, by plain stores from registers.
// Tile row t is q head e.head + (t >> row_head_shift) at position e.m0 + (t & row_pos_mask) (GQA
// packing; unpacked: e.head, e.m0 + t). Rows past rows_q, and packed rows past the tile's heads
// (zero or other heads' rows of the Q box), are dropped; rows past seqused get out 0 and lse -inf
// (the reference's convention). With one Q buffer (d256, the long-row d128 configs) a quad
// transposes its column pairs so that each lane holds 8 consecutive columns: one 16-byte store
// where out's rows are 16-byte aligned (p.store.out_vec16; d256: 16 stores per thread instead of 64, and
// a warp writes 64 contiguous bytes per row instead of 16), else four 4-byte ones (out needs only
// 4-byte alignment and even strides). Not in the block stream (two Q buffers), where the store
// runs inside an iteration next to the next tile's softmax: there the shuffles' temporaries made
// ptxas spill (d64 on three warpgroups, 160 registers), and where they fit (two warpgroups) they
// cost more than they saved (d64 s1k causal 0.944, H100 A/B 2026-11-22 run 4); plain pairs there.
template <class T, class Cfg>
__device__ __forceinline__ void store_rows(const FwdParams& p, const FwdTile& e, int row_in_tile, int quad_col,
                                           const float (&o)[Cfg::kHeadDim / 2], float (&inv)[2],
                                           float (&lse)[2]) {
  constexpr int D = Cfg::kHeadDim;
  static_assert(D % 32 == 0, "16-byte stores take 4 column groups of 8 at a time");
  const int64_t b_off = e.seq.batch_coord;  // 0 for varlen
  // The tile's q heads: pack_heads (1 unpacked), fewer in a KV head's last group.
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t = row_in_tile + 8 * h, r = e.m0 + (t & p.sched.row_pos_mask), g = t >> p.sched.row_head_shift;
    if (r >= e.seq.len_q) {
      inv[h] = 0.f;
      lse[h] = -INFINITY;
    }
    const bool keep = unsigned(r) < unsigned(e.seq.rows_q) && g < heads;  // r < 0: first_block_pad
    const int64_t head = e.head + g;
    const cuda_backend::AttnParams& a = p.attn;
    T* out = static_cast<T*>(a.out) + b_off * a.out_stride_b + (e.seq.q_offset + r) * a.out_stride_s +
             head * a.out_stride_h;
    if constexpr (Cfg::kQBuffers == 1) {
#pragma unroll
      for (int j = 0; j < D / 8; j += 4) {  // the quad's shuffles need every lane: only the store is predicated
        uint32_t m[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          m[k] = pack2<T>(o[4 * (j + k) + 2 * h] * inv[h], o[4 * (j + k) + 2 * h + 1] * inv[h]);
        const uint4 v = cuda_backend::quad_transpose(m, quad_col);
        T* dst = out + 8 * (j + quad_col);
        if (keep && p.store.out_vec16) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else if (keep) {
          reinterpret_cast<uint32_t*>(dst)[0] = v.x;
          reinterpret_cast<uint32_t*>(dst)[1] = v.y;
          reinterpret_cast<uint32_t*>(dst)[2] = v.z;
          reinterpret_cast<uint32_t*>(dst)[3] = v.w;
        }
      }
    } else if (keep) {
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * quad_col) =
            pack2<T>(o[4 * j + 2 * h] * inv[h], o[4 * j + 2 * h + 1] * inv[h]);
    }
    if (keep && a.lse != nullptr && quad_col == 0)
      a.lse[b_off * a.lse_stride_b + head * a.lse_stride_h + (e.seq.q_offset + r) * a.lse_stride_s] = lse[h];
  }
}

// This thread's consumer warpgroup (0, 1, 2), read from %tid.x at each use (volatile):
// the kernel's warp / 4 - 1, which the consumer gets as `wg`.
__device__ __forceinline__ int consumer_warpgroup() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t / 128 - 1;
}

// One consumer warpgroup: 64 query rows of every tile of this CTA's walk, as one stream of KV
// blocks. Each iteration issues QK of block n and PV of the block before it (IntraWG overlap), the
// warpgroups taking turns to issue (InterWG ping-pong). Where block n is the first of a new
// tile, that iteration also closes the previous tile: its softmax state is finished before the
// new tile's first softmax step, and its O is stored once its last PV has retired.
template <class T, class Cfg>
__device__ __forceinline__ void consume(FwdSmem<Cfg>& sm, const FwdParams& p, const CUtensorMap* to, int wg) {
  constexpr int D = Cfg::kHeadDim, N = Cfg::kBlockN;
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4;
  const int quad_col = lane % 4;
  int row_in_tile = wg * 64 + warp_in_wg * 16 + lane / 4;  // this thread's rows: +0 and +8
  const int q_row_bytes = wg * 64 * kAtomRowBytes;

  float o[D / 2];
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
  PipeState<Cfg::kStages> ps;      // K/V ring slot of the next block to consume
  PipeState<Cfg::kQBuffers> qs;    // Q buffer of the current tile
  TileWalk walk;
  // O leaves through its tile's Q buffer and a TMA store (two Q buffers, fixed-length batches):
  // that buffer is released once the store has read it, not after the tile's last QK.
  const bool tma_out = Cfg::kQBuffers == 2 && p.store.out_tma != 0;
  const bool store_thread = warp_in_wg == 0 && lane == 0;
  int q_pending = -1;  // Q buffer whose O store is in flight, to be released

  auto issue_qk = [&](int stage) {
    const uint32_t q_lo = desc_k_major_lo(sm.q[qs.stage()] + q_row_bytes);
    const uint32_t k_lo = desc_k_major_lo(sm.k[stage]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      WgmmaSS<T, N>::run(s, desc_k_major(q_lo, Cfg::kQAtomBytes, kk), desc_k_major(k_lo, Cfg::kKVAtomBytes, kk),
                         kk > 0);
    wgmma_commit();
  };
  // A tile's first PV overwrites O instead of accumulating (wgmma scale-d = 0): no zeroing of O
  // between tiles, so O has one definition through the loop (zeroing it in the tile-boundary
  // branch made ptxas copy all 64 accumulators every iteration: +3-5% time, H100 2026-11-21).
  auto issue_pv = [&](int stage, bool first_of_tile) {
    const uint32_t v_lo = desc_n_major_lo(sm.v[stage], Cfg::kKVAtomBytes);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
      WgmmaRS<T, D>::run(o, pf[kk], desc_n_major(v_lo, kk),
                         kk > 0 || !first_of_tile);
    wgmma_commit();
  };
  // Warp-granular release: each consumer warp arrives once its wgmma reads are done.
  auto release = [&](uint64_t* bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // After block n's QK: free its K slot, and the tile's Q buffer if n was the tile's last block.
  auto release_qk_operands = [&](int n) {
    release(&sm.k_empty[ps.stage()]);
    if (!tma_out && walk.t.blocks.is_last(n)) release(&sm.q_empty[qs.stage()]);
  };
  // TMA-store mode: the Q buffer of the last stored tile goes back to the producer once the store
  // has read it (one arrival per warpgroup; checked an iteration later, so nobody waits for it).
  auto release_stored_q = [&]() {
    if (q_pending < 0) return;
    if (store_thread) {
      tma_store_wait_read();
      mbar_arrive(&sm.q_empty[q_pending]);
    }
    q_pending = -1;
  };
  // The keep-bit mask of block n. It sees this thread's rows' query positions: m0 + row and + 8,
  // or packed, the rows' positions within their heads.
  auto mask_scores = [&](int n) {
    const FwdTile& t = walk.t;
    const int row0 = t.m0 + (row_in_tile & p.sched.row_pos_mask), row1 = row0 + p.sched.row8_step;
    const int n0 = t.blocks.block(n) * N;
#ifdef FASTATTN_MASK_PLAIN
    cuda_backend::apply_window_plain<N, 0>(s, t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col);
    cuda_backend::apply_window_plain<N, 1>(s, t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col);
#else
    cuda_backend::apply_keep_bits<N, 0>(
        s, cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col));
    cuda_backend::apply_keep_bits<N, 1>(
        s, cuda_backend::keep_bits<N>(t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col));
#endif
  };
  // Softcap, then the mask on partial tiles only.
  auto shape_scores = [&](int n) {
    const FwdTile& t = walk.t;
    if (p.attn.softcap != 0.f) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) s[i] = p.attn.softcap * tanhf(s[i] * p.attn.softcap_in);
    }
    if (!t.blocks.full(n)) mask_scores(n);
  };
  // After block n (scores in s): blocks n - 1 down to the returned one run in the plain loop body
  // (none when it is n): full blocks (no mask), or with Cfg::kMaskInPlainBody also the partial
  // blocks above the full ones (the causal diagonal, a window's right edge); no softcap, and not
  // the tile's last block where its QK frees the Q buffer (without a TMA store; with one the
  // store frees it).
  auto plain_lo = [&](int n) {
    const FwdTile& t = walk.t;
    const cuda_backend::BlockRange& b = t.blocks;
    // (the next block above the full ones, spelled on the fields: through above_full(next(n)) the
    // one-Q-buffer kernels' loop grew by an instruction)
    if (p.attn.softcap != 0.f || (!Cfg::kMaskInPlainBody && n - 1 >= b.full_end)) return n;
    return b.full_run_end(!tma_out);
  };
  auto scores_to_p = [&](const float (&x)[N / 2]) {
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<T>(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
  };
  // The TMA-store path of store_output below (two Q buffers only).
  auto stage_and_store = [&](const FwdTile& e, int q_buf, float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = e.m0 + row_in_tile + 8 * h;
      if (row >= e.seq.len_q) {  // past seqused: out 0, lse -inf (reference convention)
        inv[h] = 0.f;
        lse[h] = -INFINITY;
      }
      const cuda_backend::AttnParams& a = p.attn;
      if (a.lse != nullptr && quad_col == 0 && unsigned(row) < unsigned(e.seq.rows_q))  // row < 0: first_block_pad
        a.lse[int64_t(e.seq.batch_coord) * a.lse_stride_b + int64_t(e.head) * a.lse_stride_h +
              int64_t(e.seq.q_offset + row) * a.lse_stride_s] = lse[h];
    }
    // This warpgroup's 64 rows, normalised, into the Q buffer in the 128-byte-swizzled layout that
    // TMA reads (16-byte chunk c of row r at chunk c ^ (r % 8)), by stmatrix: per instruction the
    // 8 x 8 blocks (rows +0, +8) x (column groups j, j + 1) of this warp's 16 rows. Lane l gives
    // row l % 8 of block l / 8; its chunk j + (l / 16) lands at ((j % 8) ^ (l / 16) ^ (l % 8)),
    // j even. Unpacked tiles only: the host turns out_tma off under GQA packing.
    const int blk = lane / 8, r = warp_in_wg * 16 + (blk & 1) * 8 + lane % 8;
    const uint32_t row_base = smem_addr(sm.q[q_buf]) + (wg * 64 + r) * kAtomRowBytes;
    const uint32_t chunk_xor = ((blk >> 1) ^ (lane % 8)) * 16;
#pragma unroll
    for (int j = 0; j < D / 8; j += 2)
      stmatrix_x4(row_base + (j / 8) * Cfg::kQAtomBytes + (((j % 8) * 16) ^ chunk_xor),
                  pack2<T>(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]),
                  pack2<T>(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]),
                  pack2<T>(o[4 * j + 4] * inv[0], o[4 * j + 5] * inv[0]),
                  pack2<T>(o[4 * j + 6] * inv[1], o[4 * j + 7] * inv[1]));
    fence_smem_for_tma();
    named_bar_sync(kStoreBar + wg, 128);
    if (store_thread) {
      uint8_t* rows = sm.q[q_buf] + wg * 64 * kAtomRowBytes;
#pragma unroll
      for (int a = 0; a < Cfg::kAtoms; ++a)
        tma_store_4d(to, rows + a * Cfg::kQAtomBytes, a * kAtomCols, e.m0 + wg * 64, e.head, e.seq.batch_coord);
      tma_store_commit();
    }
    q_pending = q_buf;
  };
  // Tile e's output from o and the finished softmax state. The caller keeps e from when the tile
  // was current (re-deriving it from the tile id cost ~100 instructions of integer division, and
  // for varlen two global loads, at every tile boundary).
  auto store_output = [&](const FwdTile& e, int q_buf, float (&inv)[2], float (&lse)[2]) {
    if (!tma_out) {
      store_rows<T, Cfg>(p, e, row_in_tile, quad_col, o, inv, lse);
      return;
    }
    if constexpr (Cfg::kQBuffers == 2) stage_and_store(e, q_buf, inv, lse);  // tma_out implies it
  };
  // The next tile that sees keys; tiles that see none (empty window, s_k = 0) get their zero rows
  // and -inf LSE here, with no load and no MMA.
  auto next_keyed_tile = [&]() {
    while (walk.next<Cfg>(p)) {
      if (walk.t.sees_keys()) return true;
      float zero[D / 2] = {}, inv[2] = {0.f, 0.f}, lse[2] = {-INFINITY, -INFINITY};
      store_rows<T, Cfg>(p, walk.t, row_in_tile, quad_col, zero, inv, lse);
    }
    return false;
  };

  // Ping-pong: the consumer warpgroups issue in a ring, 0, 1, (2,) 0, ...: warpgroup w issues only
  // after bar(w) opened, then opens the next one's. In each run of blocks every warpgroup has as
  // many issue phases; the last warpgroup opens bar(0) once up front and skips its opening in the
  // run's last phase, so every barrier sees as many arrivals as syncs.
  constexpr int kWGs = Cfg::kConsumerWarpgroups;
  auto my_turn = [&]() {
    if constexpr (Cfg::kPingPong) named_bar_sync(kPingPongBar + wg, 256);
  };
  auto your_turn = [&](bool last_phase) {
    if constexpr (Cfg::kPingPong)
      if (!last_phase || wg != kWGs - 1) named_bar_arrive(kPingPongBar + (wg + 1) % kWGs, 256);
  };

  // An idle tile (idle_for) for this warpgroup: its scores are never stored, so it takes the
  // stream's first block of the tile (K of blocks.first()) as the walk's last, whose QK also frees
  // the Q buffer, and the tile ends after it; then skip_idle_blocks follows the tile's other
  // blocks without work: for each, it waits for K and the block before's V as a working
  // first warpgroup would (the others read them after its turn), takes and passes its turn, and
  // releases both slots. The tile's last V stays with the iteration that follows, whose PV (of
  // the first block's P, unused) reads and releases it as the other warpgroups' PV of that block
  // does. The count is re-derived from the tile (kept across the loop, it spilled 4 bytes, d = 64).
  auto first_block = [&]() { return idle_for(p, walk.t, wg) ? walk.t.blocks.last() : walk.t.blocks.first(); };
  auto skip_idle_blocks = [&](const FwdTile& e) {
    if (!idle_for(p, e, wg)) return;
    for (int j = e.blocks.last(); j < e.blocks.first(); ++j) {  // one turn per block after the first
      PipeState<Cfg::kStages> prev = ps;
      ps.advance();
      mbar_wait(&sm.k_full[ps.stage()], ps.phase());
      mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      my_turn();
      your_turn(false);
      release(&sm.k_empty[ps.stage()]);
      release(&sm.v_empty[prev.stage()]);
    }
  };

  bool more = next_keyed_tile();
  while (more) {  // one run of blocks: the whole walk with two Q buffers, else one tile
    prof::LoopProbe probe(wg);  // empty unless FASTATTN_LOOP_PROBES (issue #6)
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;  // overwritten by the first PV; keeps it defined
    softmax = cuda_backend::OnlineSoftmax<N>{};
    FwdTile done;              // the tile whose blocks are all issued, until its output is stored
    int n = first_block();     // the block whose scores are in s
    bool pv_first = true;      // the pending PV (of block n) is its tile's first

    if (Cfg::kPingPong && wg == kWGs - 1) named_bar_arrive(kPingPongBar, 256);
    mbar_wait(&sm.q_full[qs.stage()], qs.phase());
    mbar_wait(&sm.k_full[ps.stage()], ps.phase());
    my_turn();
    issue_qk(ps.stage());
    your_turn(false);
    wgmma_wait<0>();
    fence_operands(s);
    release_qk_operands(n);
    shape_scores(n);
    softmax.step(s, p.attn.scale_log2, alpha);
    scores_to_p(s);

    // One block of the stream: QK of block n, PV of the block before it. The generic body handles
    // a new tile's first block (new_tile: the previous tile's softmax is finished and its output
    // stored under this block's softmax), the tile's last (its QK frees the Q buffer), softcap and
    // the mask. The plain body (generic = false) runs the blocks between, back to back, with none
    // of those tests: its loop's only branch on the block is the back edge (FA3 runs masked and
    // unmasked blocks in separate loops too), except that with Cfg::kMaskInPlainBody it also
    // masks the partial blocks above the full range, after one comparison per block. d128
    // causal's second warpgroup: 954 static cycles a block against 985 in the generic body
    // (pass 22, docs/notes/fwd-sm90.md).
    auto run_block = [&](auto generic, bool new_tile) {
      constexpr bool kGeneric = decltype(generic)::value;
      probe.mark(prof::kIterBegin);
      PipeState<Cfg::kStages> prev = ps;
      ps.advance();
      if (new_tile) {
        // After a one-block tile the Q buffer wanted now may be the one whose O store is still to
        // be released (the release normally comes after the softmax): release it first.
        release_stored_q();
        mbar_wait(&sm.q_full[qs.stage()], qs.phase());
      }
      // In the generic body with ping-pong only the first warpgroup waits for the K/V tiles: the
      // others issue after it (their turn opens once it has issued; the named barrier orders its
      // mbarrier acquire before their wgmma reads), so the tiles have landed by then. In the plain
      // body every warpgroup waits: a wait on a completed phase costs less than the branch around
      // it (d128 +0.5% against the first-only wait there, H100 A/B 2026-11-22). V is waited for
      // between the two GEMMs, so that its wait runs while QK is on the tensor cores. FA3 does
      // both; measured d128 s8k full +2.5%, GQA +1.7%, s1k +1.6%, the rest +-1% (H100 A/B,
      // 2026-11-22). Three warpgroups wait for V before the turn (Cfg::kVWaitUnderQK).
      const bool waits_tiles = !Cfg::kPingPong || wg == 0 || !kGeneric;
      if (waits_tiles) {
        mbar_wait(&sm.k_full[ps.stage()], ps.phase());
        if (!Cfg::kVWaitUnderQK) mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      }
      probe.mark(prof::kTilesReady);
      my_turn();
      probe.mark(prof::kTurnTaken);
      issue_qk(ps.stage());
      if (Cfg::kVWaitUnderQK && waits_tiles) mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      issue_pv(prev.stage(), pv_first);
      pv_first = new_tile;
      your_turn(false);
      probe.mark(prof::kIssued);
      wgmma_wait<1>();  // S ready; PV of the block before may still run
      fence_operands(s);
      probe.mark(prof::kScoresReady);
      if constexpr (kGeneric)
        release_qk_operands(n);
      else
        release(&sm.k_empty[ps.stage()]);
      float inv[2], lse[2];
      if (new_tile) {  // the previous tile's softmax is complete: keep its normaliser, start afresh
        softmax.finish(inv, lse);
        softmax = cuda_backend::OnlineSoftmax<N>{};
      }
      if constexpr (kGeneric)
        shape_scores(n);
      else if constexpr (Cfg::kMaskInPlainBody) {
        if (walk.t.blocks.above_full(n)) mask_scores(n);  // plain blocks are >= full_begin (plain_lo)
      }
      probe.mark(prof::kMasked);
      // PV(n+1) retires: O is complete for block n+1. A plain wgmma_wait<0>() was hoisted by ptxas
      // above the whole softmax (which then ran after PV(n+1) instead of under it); a wait in the
      // arms of a branch stays put. The branch is on the warpgroup, so each warpgroup executes one
      // wait instruction (.aligned), and the two are spelled apart so that the compiler does not
      // merge them above the branch.
      auto wait_pv = [&] {
        if (wg == 0)
          wgmma_wait<0>();
        else
          wgmma_wait_alt<0>();
        fence_operands(o);
        probe.mark(prof::kPvDone);
        release(&sm.v_empty[prev.stage()]);
      };
      // O *= alpha only where a row of this warp moved its max (alpha is exactly 1 otherwise; a
      // max moves only past OnlineSoftmax::kMaxSlack, pass 29: +2-5% at d128). A fresh tile's
      // alpha is 0 (harmless: its first PV overwrites O).
      auto new_max = [&] { return __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f); };
      // The PV wait sits in the middle of the softmax, between the rows' exps: row 1's 32 exps
      // (MUFU-paced, 8 cycles each per warp) then share a basic block with the conversion of P,
      // which used to run after the wait on its own (64 cycles a turn, static). A finished tile's
      // O is stored right after the wait, from the previous tile's Q buffer.
      auto between_rows = [&] {
        probe.mark(prof::kSoftmaxDone);
        release_stored_q();
        wait_pv();
        if (new_tile) store_output(done, qs.stage() ^ 1, inv, lse);
      };
      // A full step: the row maxima, then the exps; O rescaled where a max moved.
      auto full_step = [&](auto&& hook) {
        if constexpr (Cfg::kMaximaFirst)
          softmax.step_maxima_first(s, p.attn.scale_log2, alpha, hook);
        else
          softmax.step(s, p.attn.scale_log2, alpha, hook);
        scores_to_p(s);
        if (new_max()) cuda_backend::scale_rows<D>(o, alpha);
      };
      // Plain blocks with Cfg::kDeferredMax take their exps against the running max as it stands,
      // with no max reduction before them (OnlineSoftmax::step_deferred): P is converted beside row
      // 1's exps, and only a warp whose p passed the limit redoes the block, on the kept scores.
      if constexpr (!kGeneric && Cfg::kDeferredMax) {
        float pr[N / 2], sum[2];
        softmax.step_deferred(s, pr, p.attn.scale_log2, sum, between_rows);
        scores_to_p(pr);
        if (__all_sync(0xffffffffu, softmax.deferred_ok(sum)))
          softmax.accept_deferred(sum);
        else
          full_step(cuda_backend::NoHook{});  // PV has retired: nothing between the rows
      } else {
        full_step(between_rows);
      }
      probe.mark(prof::kIterEnd);
    };

    // One loop with two bodies: a nested plain loop made ptxas serialize the wgmmas of the
    // one-Q-buffer configs ("insufficient register resources for the wgmma pipeline").
    int lo = plain_lo(n);
    bool plain = n > lo;  // block n - 1 runs in the plain body; known a block ahead
    for (;;) {
      if (plain) {
        n = walk.t.blocks.next(n);
        plain = n > lo;
        run_block(std::false_type{}, false);
        continue;
      }
      bool new_tile = false;
      n = walk.t.blocks.next(n);
      if (walk.t.blocks.done(n)) {  // the tile's blocks are all issued: move on to the next tile
        done = walk.t;
        skip_idle_blocks(done);
        if constexpr (Cfg::kQBuffers == 1) break;
        more = next_keyed_tile();
        if (!more) break;
        new_tile = true;
        n = first_block();
        qs.advance();
      }
      run_block(std::true_type{}, new_tile);
      lo = plain_lo(n);
      plain = n > lo;
    }

    // The run's last PV, then its last tile's output.
    // Afresh: kept across the loop, either spilled 4 bytes (d = 64; d = 128's probed build with the
    // deferred max).
    if constexpr (Cfg::kMaskInPlainBody || Cfg::kDeferredMax) {
      wg = consumer_warpgroup();
      row_in_tile = wg * 64 + (threadIdx.x / 32) % 4 * 16 + threadIdx.x % 32 / 4;  // as above
    }
    mbar_wait(&sm.v_full[ps.stage()], ps.phase());
    my_turn();
    issue_pv(ps.stage(), pv_first);
    your_turn(true);
    wgmma_wait<0>();
    fence_operands(o);
    release(&sm.v_empty[ps.stage()]);
    ps.advance();
    float inv[2], lse[2];
    softmax.finish(inv, lse);
    release_stored_q();
    store_output(done, qs.stage(), inv, lse);
    release_stored_q();
    probe.mark(prof::kEpilogueEnd);
    probe.finish();
    if constexpr (Cfg::kQBuffers == 1) {
      qs.advance();
      more = next_keyed_tile();
    }
  }
}

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
    prefetch_tma_map(&tq);
    prefetch_tma_map(&tk);
    prefetch_tma_map(&tv);
    // q_empty: per consumer warp after the tile's last QK, or per warpgroup after its O store
    const bool tma_out = Cfg::kQBuffers == 2 && p.store.out_tma != 0;
    if (tma_out) prefetch_tma_map(&to);
#pragma unroll
    for (int b = 0; b < Cfg::kQBuffers; ++b) {
      mbar_init(&sm.q_full[b], 1);
      mbar_init(&sm.q_empty[b], tma_out ? Cfg::kConsumerWarpgroups : 4 * Cfg::kConsumerWarpgroups);
    }
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

  // Both roles walk the same tiles; tiles that see no key load nothing.
  if (warp < 4) {
    regs_release<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    PipeState<Cfg::kStages> ps;
    PipeState<Cfg::kQBuffers> qs;
    TileWalk walk;
    while (walk.next<Cfg>(p)) {
      if (!walk.t.sees_keys()) continue;
      produce<Cfg>(sm, walk.t, &tq, &tk, &tv, ps, qs);
      qs.advance();
    }
  } else {
    regs_claim<Cfg::kConsumerRegs>();
    consume<T, Cfg>(sm, p, &to, warp / 4 - 1);
    if (threadIdx.x % 128 == 0) tma_store_wait_all();  // the O stores have left smem and landed
  }
}

}  // namespace fastattn::sm90
