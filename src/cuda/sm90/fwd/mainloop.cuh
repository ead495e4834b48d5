// The consumer warpgroups of the Hopper forward: the stream of KV blocks (QK, mask, online
// softmax, PV), the ping-pong turns, and each tile's output through the epilogue. One force-inlined
// call tree: its pieces are closures over the loop's state because ptxas register allocation
// needs the whole loop in one function (see the comments at each piece).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/common/math.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/softcap.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/prof/loop_probes.cuh"
#include "cuda/sm90/fwd/config.h"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/barriers.h"
#include "cuda/sm90/prim/ldmatrix.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/stmatrix.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"
#include "cuda/sm90/fwd/split_stamps.cuh"

namespace fastattn::sm90 {

// Bias keys (j, j + 1) of one row as one word (key j in the low half): one 32-bit load where the pair
// is 4-byte aligned (FwdBias::paired), else two 16-bit loads.
template <bool kPaired, class T>
__device__ __forceinline__ uint32_t load_bias_pair(const T* at) {
  if constexpr (kPaired) {
    return __ldg(reinterpret_cast<const uint32_t*>(at));
  } else {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(at);
    return uint32_t(__ldg(h)) | (uint32_t(__ldg(h + 1)) << 16);
  }
}

// The staged bias's copies (FwdBias::staged): 16 bytes global -> smem through L2 (each bias element
// is read once per tile), one commit group a block, and the wait for it.
__device__ __forceinline__ void bias_cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void bias_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bias_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// This warp's slot of the staged bias (BiasStageSmem): warp w of the consumers (w = thread / 32 - 4).
template <class Cfg>
__device__ __forceinline__ uint32_t bias_slot(FwdSmem<Cfg>& sm) {
  if constexpr (Cfg::kBiasStaged)
    return smem_addr(sm.bias.warp[threadIdx.x / 32 - 4]);
  else
    return 0;
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
  constexpr int D = Cfg::kHeadDim, DV = Cfg::kHeadDimV, N = Cfg::kBlockN;  // QK over D, O of DV columns
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4;
  const int quad_col = lane % 4;
  int row_in_tile = wg * 64 + warp_in_wg * 16 + lane / 4;  // this thread's rows: +0 and +8
  const int q_row_bytes = wg * 64 * kAtomRowBytes;

  float o[DV / 2];
  float s[N / 2];
  uint32_t pf[N / 16][4];
  cuda_backend::OnlineSoftmax<N> softmax;
  float alpha[2];
  PipeState<Cfg::kStages> ps;      // K/V ring slot of the next block to consume
  PipeState<Cfg::kQBuffers> qs;    // Q buffer of the current tile
  TileWalk<Cfg> walk;
  // O leaves through its tile's Q buffer and a TMA store (two Q buffers, fixed-length batches):
  // that buffer is released once the store has read it, not after the tile's last QK.
  const bool tma_out = !Cfg::kSplit && Cfg::kQBuffers == 2 && p.store.out_tma != 0;
  const bool store_thread = warp_in_wg == 0 && lane == 0;
  int q_pending = -1;  // Q buffer whose O store is in flight, to be released

  // A key-half tile (Cfg::kPageHalves): half h's keys at h * kHalfBytes, its atoms kHalfAtomBytes
  // apart. S's columns [0, N/2) are the first N / 4 of an N-wide accumulator's registers, so the
  // two N / 2 halves fill s as one N-wide wgmma would.
  constexpr int kHalfAtomBytes = Cfg::kKVAtomBytes / 2, kHalfBytes = Cfg::kAtoms * kHalfAtomBytes;
  auto issue_qk = [&](int stage) {
    const uint32_t q_lo = desc_k_major_lo<Cfg::kClusterMerge>(sm.q[qs.stage()] + q_row_bytes);
    const uint32_t k_lo = desc_k_major_lo<Cfg::kClusterMerge>(sm.k[stage]);
    wgmma_fence();
    if constexpr (Cfg::kPageHalves) {
      const uint32_t k_hi = desc_k_major_lo<Cfg::kClusterMerge>(sm.k[stage] + kHalfBytes);
      auto& s_lo = *reinterpret_cast<float(*)[N / 4]>(s);
      auto& s_hi = *reinterpret_cast<float(*)[N / 4]>(s + N / 4);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t q_desc = desc_k_major(q_lo, Cfg::kQAtomBytes, kk);
        WgmmaSS<T, N / 2>::run(s_lo, q_desc, desc_k_major(k_lo, kHalfAtomBytes, kk), kk > 0);
        WgmmaSS<T, N / 2>::run(s_hi, q_desc, desc_k_major(k_hi, kHalfAtomBytes, kk), kk > 0);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        WgmmaSS<T, N>::run(s, desc_k_major(q_lo, Cfg::kQAtomBytes, kk), desc_k_major(k_lo, Cfg::kKVAtomBytes, kk),
                           kk > 0);
    }
    wgmma_commit();
  };
  // A tile's first PV overwrites O instead of accumulating (wgmma scale-d = 0): no zeroing of O
  // between tiles, so O has one definition through the loop (zeroing it in the tile-boundary
  // branch made ptxas copy all 64 accumulators every iteration: +3-5% time).
  auto issue_pv = [&](int stage, bool first_of_tile) {
    wgmma_fence();
    if constexpr (Cfg::kPageHalves) {  // steps of 16 keys: the first N / 32 in half 0
      const uint32_t v_lo = desc_n_major_lo<Cfg::kClusterMerge>(sm.v[stage], kHalfAtomBytes);
      const uint32_t v_hi = desc_n_major_lo<Cfg::kClusterMerge>(sm.v[stage] + kHalfBytes, kHalfAtomBytes);
#pragma unroll
      for (int kk = 0; kk < N / 16; ++kk)
        WgmmaRS<T, DV>::run(o, pf[kk], desc_n_major(kk < N / 32 ? v_lo : v_hi, kk % (N / 32)),
                           kk > 0 || !first_of_tile);
    } else {
      const uint32_t v_lo = desc_n_major_lo<Cfg::kClusterMerge>(sm.v[stage], Cfg::kKVAtomBytes);
#pragma unroll
      for (int kk = 0; kk < N / 16; ++kk)
        WgmmaRS<T, DV>::run(o, pf[kk], desc_n_major(v_lo, kk),
                           kk > 0 || !first_of_tile);
    }
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
  // Element bitmask (Cfg::kBitmask): block n's list entry (block * 2 + needs bits) and its packed bits
  // came with its K tile into the ring slot's smem (producer.cuh produce_bit_list); this thread's words
  // of its rows r and r + 8 (row r's word of quad thread t at r * 4 + t) and the entry are read right
  // after the QK issue, before the slot's release: no global load in the consumers' block (they were a
  // dependent chain, list entry then slot, and the entry was read again between the S wait and the
  // softmax). Where the entry asks for no bits the words are stale and unused.
  static_assert(!Cfg::kBitmask || !Cfg::kMaskInPlainBody, "bitmask: its plain body masks on full(n), not above_full(n)");
  int bit_entry = 0;
  uint32_t slot_bits[2];
  auto read_bits = [&](int n, int stage) {
    if constexpr (Cfg::kBitmask) {
      if (walk.t.blocks.full(n)) return;  // no mask: nothing to read
      const uint32_t w = smem_addr(sm.bits.words[stage] + row_in_tile * 4 + quad_col);
      bit_entry = int(lds_u32(smem_addr(&sm.bits.entry[stage])));
      slot_bits[0] = lds_u32(w);
      slot_bits[1] = lds_u32(w + 32 * 4);
    }
  };
  // The sequence's last key block, where it holds rows past len_k: V's rows there zeroed before its
  // PV (zero_v_rows_from), waited for here. The walk visits it first in its tile (blocks are walked
  // last first), so the unmasked configs check a tile's first block only; a bit list may order it
  // after other partial blocks, so the bitmask configs check every partial block (mask_scores).
  auto zero_v_past_keys = [&](int block) {
    const int first_row = walk.t.seq.len_k - block * N;
    if (first_row < N) {
      mbar_wait(&sm.v_full[ps.stage()], ps.phase());
      zero_v_rows_from<Cfg>(sm, ps.stage(), first_row, kStoreBar + wg);
    }
  };
  auto mask_scores = [&](int n) {
    const FwdTileFor<Cfg>& t = walk.t;
    const int row0 = t.m0 + (row_in_tile & p.sched.row_pos_mask), row1 = row0 + p.sched.row8_step;
    if constexpr (Cfg::kBitmask) {  // the caller's bits, AND the window's keep bits where it cuts the block
      const int n0 = (bit_entry >> 1) * N;
      zero_v_past_keys(bit_entry >> 1);
      uint32_t k0 = bit_entry & 1 ? slot_bits[0] : ~0u, k1 = bit_entry & 1 ? slot_bits[1] : ~0u;
      // A block that the window keeps whole for every row of the tile (every block of a mask without
      // causal or window edges, whose lengths are multiples of 128) skips the keep-word arithmetic
      // (~80 integer instructions a block): lo and hi are non-decreasing in the row, so rows [m0, m1)
      // keep [n0, n0 + N) when the last row's lo and the first row's hi do. Tile-uniform values; rows
      // past m1 are never stored.
      if (t.mask.lo(t.m1 - 1) > n0 || t.mask.hi(t.m0) < n0 + N) {
        k0 &= cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col).w[0];
        k1 &= cuda_backend::keep_bits<N>(t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col).w[0];
      }
      cuda_backend::apply_keep_bits<N, 0>(s, cuda_backend::KeepBits<N>{{k0}});
      cuda_backend::apply_keep_bits<N, 1>(s, cuda_backend::KeepBits<N>{{k1}});
    } else {
      const int n0 = t.blocks.block(n) * N;
      cuda_backend::apply_keep_bits<N, 0>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row0) - n0, t.mask.hi(row0) - n0, quad_col));
      cuda_backend::apply_keep_bits<N, 1>(
          s, cuda_backend::keep_bits<N>(t.mask.lo(row1) - n0, t.mask.hi(row1) - n0, quad_col));
    }
  };
  // Additive bias (Cfg::kBias): s <- s * scale + bias (natural units, one FFMA an element; the softmax
  // then runs with scale log2 e: softmax_scale; session 38 took s * scale_log2 + bias * log2 e, an FMUL
  // more an element). Element (row, key) of the block is
  // s[4 j + 2 h + e] with row = m0 + row_in_tile + 8 h, key = n0 + 8 j + 2 quad_col + e: each thread
  // loads its two adjacent keys at once: one 32-bit load where FwdBias::paired, else two 16-bit ones,
  // each width on its own branch of add_bias. Only keys inside the sequence are read (the bias covers
  // the longest sequence, not the tile's padding).
  // Paired biases: row 0's pairs of a whole block (keys all inside the sequence), loaded before the
  // wait for S so that they fly under the QK (row 1's would not fit the registers beside S, O and P);
  // bias_ready says whether bias_pre holds block n's (else add_bias loads them itself).
  constexpr float kLog2e = 1.4426950408889634f;
  const float bias_score_scale = p.attn.scale_log2 * (1.f / kLog2e);  // the softmax scale (or 1 under softcap)
  uint32_t bias_pre[Cfg::kBias ? N / 8 : 1];
  bool bias_ready = false;
  auto bias_head = [&]() {
    const FwdTileFor<Cfg>& t = walk.t;
    return static_cast<const T*>(p.bias.data) + int64_t(t.batch) * p.bias.batch_stride +
           int64_t(t.head / p.bias.head_div) * p.bias.head_stride;
  };
  // Staged biases (FwdBias::staged): this warp copies its 16 rows' bias of block n (whole blocks only)
  // into its BiasStageSmem slot, 16 bytes a copy, rows coalesced (a copy instruction covers 512
  // contiguous-by-row bytes); add_bias issues the next block's copy right after reading this one's,
  // so that the copy has a whole block's softmax and GEMMs to land in. bias_staged_n: the block
  // position whose copy is in flight (-1 none; a tile's first block is copied where it is added).
  int bias_staged_n = -1;
  // Lane l copies chunks (l % 8) + 8 k of rows l / 8 + 4 i: an instruction covers 128 contiguous
  // bytes of 4 rows, and a lane needs one row address per i (k is an immediate offset). The rows'
  // sources depend on the tile only: bias_tile_rows sets them when the walk moves (the head's bias at
  // the lane's first key, and each row's offset in elements: 32 bits, as the host stages only biases
  // whose rows span less than 2^31 elements; rows past the sequence read row 0). Not at d 64's N 192,
  // whose scores leave no registers to keep them across the loop (spills): set per block there.
  constexpr bool kBiasRowsPerTile = N == 128;
  const T* bias_lane_src = nullptr;
  int bias_row_off[Cfg::kBiasStaged ? 4 : 1] = {};
  auto bias_tile_rows = [&]() {
    if constexpr (Cfg::kBiasStaged) {
      const FwdTileFor<Cfg>& t = walk.t;
      bias_lane_src = bias_head() + 8 * (lane % 8);
      const int row_base = t.m0 + (row_in_tile & ~15) + lane / 8;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row_base + 4 * i;
        // unsigned: wraps (unused) instead of overflowing where the host does not stage (rows32 false)
        bias_row_off[i] = int((unsigned(row) < unsigned(t.seq.len_q) ? unsigned(row) : 0u) * unsigned(p.bias.row_stride));
      }
    }
  };
  auto stage_bias = [&](int n) {
    if constexpr (Cfg::kBiasStaged) {
      static_assert(N % 64 == 0, "bias stage: 64-key groups");
      if constexpr (!kBiasRowsPerTile) bias_tile_rows();
      const T* head = bias_lane_src + walk.t.blocks.block(n) * N;
      const uint32_t slot = bias_slot(sm) + (lane / 8) * (N * 2);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // slot row lane / 8 + 4 i, whose % 8 is lane / 8 + 4 (i % 2)
        const T* src = head + bias_row_off[i];
        const uint32_t dst = slot + 4 * i * (N * 2) + (((lane % 8) ^ (lane / 8 + 4 * (i % 2))) * 16);
#pragma unroll
        for (int k = 0; k < N / 64; ++k) bias_cp_async16(dst + 128 * k, src + 64 * k);
      }
      bias_cp_async_commit();
    }
  };
  auto prefetch_bias = [&](int n) {
    if constexpr (Cfg::kBias) {
      const FwdTileFor<Cfg>& t = walk.t;
      const int n0 = t.blocks.block(n) * N, row = t.m0 + row_in_tile;
      bias_ready = p.bias.paired && !(Cfg::kBiasStaged && p.bias.staged) && n0 + N <= t.seq.len_k;
      if (bias_ready) {
        const T* r = bias_head() + int64_t(unsigned(row) < unsigned(t.seq.len_q) ? row : 0) * p.bias.row_stride +
                     n0 + 2 * quad_col;
#pragma unroll
        for (int j = 0; j < N / 8; ++j) bias_pre[j] = load_bias_pair<true>(r + 8 * j);
      }
    }
  };
  // whole_block (true_type): block n's keys are known to lie inside the sequence (the plain body's full
  // blocks), so the sequence's-last-block branch is not compiled there.
  auto add_bias = [&](int n, auto whole_block) {
    if constexpr (Cfg::kBias) {
      constexpr bool kWhole = decltype(whole_block)::value;
      const FwdTileFor<Cfg>& t = walk.t;
      const FwdBias& fb = p.bias;
      const int n0 = t.blocks.block(n) * N;
      auto add = [&](int h, int j, float b0, float b1) {
        s[4 * j + 2 * h] = fmaf(s[4 * j + 2 * h], bias_score_scale, b0);
        s[4 * j + 2 * h + 1] = fmaf(s[4 * j + 2 * h + 1], bias_score_scale, b1);
      };
      if (fb.alibi) {
        // ALiBi, computed: -slope |dist| with dist = row + len_k - len_q - key exact in fp32 (|dist| < 2^24),
        // one rounding (the product), as FlashAttention's. Keys past the sequence get finite terms and
        // are masked after. The slope's load is L1-resident after the tile's first block. (One FFMA a term
        // on rows whose keys lie on one side of the diagonal: ALiBi 1-2 % faster, but the stored bias's d 64
        // kernel 9-11 % slower: notes, masks-sm90.md "ALiBi".)
        const float neg_slope = -static_cast<const float*>(fb.data)[int64_t(t.batch) * fb.batch_stride + t.head];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float dist0 = float(t.m0 + row_in_tile + 8 * h + t.seq.len_k - t.seq.len_q - n0 - 2 * quad_col);
#pragma unroll
          for (int j = 0; j < N / 8; ++j)
            add(h, j, neg_slope * fabsf(dist0 - float(8 * j)), neg_slope * fabsf(dist0 - float(8 * j + 1)));
        }
        return;
      }
      const T* head_base = bias_head();
      // Rows past the sequence (padding; never stored) read row 0's bias: every load of a block
      // whose keys are all inside the sequence is then in bounds, unconditionally.
      const T* rows[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = t.m0 + row_in_tile + 8 * h;
        rows[h] = head_base + int64_t(unsigned(row) < unsigned(t.seq.len_q) ? row : 0) * fb.row_stride + n0 +
                  2 * quad_col;
      }
      // kPaired: 32-bit loads, and row 0's prefetched pairs where bias_ready.
      auto add_block = [&](auto paired) {
        constexpr bool kPaired = decltype(paired)::value;
        if (kWhole || n0 + N <= t.seq.len_k) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < N / 8; ++j) {
              uint32_t w;
              if constexpr (kPaired)
                w = h == 0 && bias_ready ? bias_pre[j] : load_bias_pair<true>(rows[h] + 8 * j);
              else
                w = load_bias_pair<false>(rows[h] + 8 * j);
              const float2 f = cuda_backend::unpack2<T>(w);
              add(h, j, f.x, f.y);
            }
        } else {  // the sequence's last block: keys past len_k add 0 (masked after)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < N / 8; ++j) {
              const int key = n0 + 8 * j + 2 * quad_col;
              float2 f = make_float2(0.f, 0.f);
              if (key + 1 < t.seq.len_k)
                f = cuda_backend::unpack2<T>(load_bias_pair<kPaired>(rows[h] + 8 * j));
              else if (key < t.seq.len_k)
                f.x = cuda_backend::to_float(rows[h][8 * j]);
              add(h, j, f.x, f.y);
            }
        }
      };
      const bool staged = Cfg::kBiasStaged && fb.staged;
      if (staged && (kWhole || n0 + N <= t.seq.len_k)) {
        if (bias_staged_n != n) stage_bias(n);
        bias_cp_async_wait_all();
        __syncwarp();  // every lane's copies have landed
        if constexpr (N == 128) {
          // One ldmatrix per two chunks: matrix i = lane / 8 is the slot's rows 8 h.. (h = i % 2) at chunk
          // j + i / 2, which lands as this thread's words (h, j + i / 2). Lane l addresses row
          // rr = 8 h + l % 8 (rr % 8 = l % 8); chunk c of it lies at c ^ (l % 8), and for even j,
          // (j + i / 2) ^ (l % 8) = j ^ ((i / 2) ^ (l % 8)).
          const int mtx = lane / 8, swz = (mtx / 2) ^ (lane % 8);
          const uint32_t row_at = bias_slot(sm) + (lane % 8 + 8 * (mtx % 2)) * (N * 2);
#pragma unroll
          for (int j = 0; j < N / 8; j += 2) {
            uint32_t w[4];
            ldmatrix_x4(row_at + ((j ^ swz) * 16), w);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float2 f = cuda_backend::unpack2<T>(w[i]);
              add(i % 2, j + i / 2, f.x, f.y);
            }
          }
        } else {
          // d 64's 192-key blocks: a word a load (row rr = lane / 4 + 8 h, rr % 8 = lane / 4; chunk j; word
          // quad_col). The ldmatrix read measured 1-2 % slower here (notes, masks-sm90.md, session 41).
          const int r = lane / 4;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t row_at = bias_slot(sm) + (r + 8 * h) * (N * 2) + quad_col * 4;
#pragma unroll
            for (int j = 0; j < N / 8; ++j) {
              const float2 f = cuda_backend::unpack2<T>(lds_u32(row_at + ((j ^ r) * 16)));
              add(h, j, f.x, f.y);
            }
          }
        }
      } else if (fb.paired) {
        add_block(std::true_type{});
      } else {
        add_block(std::false_type{});
      }
      bias_ready = false;
      if (staged) {  // the next block's copy, once every lane has read this one's
        __syncwarp();
        const int nx = t.blocks.next(n);
        bias_staged_n = -1;
        if (!t.blocks.done(nx) && t.blocks.block(nx) * N + N <= t.seq.len_k) {
          stage_bias(nx);
          bias_staged_n = nx;
        }
      }
    }
  };
  // Softcap, the bias (Cfg::kBias), then the mask on partial tiles only.
  auto shape_scores = [&](int n) {
    const FwdTileFor<Cfg>& t = walk.t;
    if (p.attn.softcap != 0.f) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) s[i] = cuda_backend::softcap_score(s[i], p.attn.softcap, p.attn.softcap_in);
    }
    add_bias(n, std::false_type{});
    if (!t.blocks.full(n)) mask_scores(n);
  };
  // The scale the softmax applies: the bias kernels scaled the scores already (add_bias), to natural
  // units.
  const float softmax_scale = Cfg::kBias ? kLog2e : p.attn.scale_log2;
  // After block n (scores in s): blocks n - 1 down to the returned one run in the plain loop body
  // (none when it is n): full blocks (no mask), or with Cfg::kMaskInPlainBody also the partial
  // blocks above the full ones (the causal diagonal, a window's right edge); no softcap, and not
  // the tile's last block where its QK frees the Q buffer (without a TMA store; with one the
  // store frees it).
  auto plain_lo = [&](int n) {
    const FwdTileFor<Cfg>& t = walk.t;
    const auto& b = t.blocks;
    // (the next block above the full ones, spelled on the fields: through above_full(next(n)) the
    // one-Q-buffer kernels' loop grew by an instruction)
    if constexpr (Cfg::kBias)
      if (!p.bias.plain) return n;  // FASTATTN_BIAS_PLAIN=0: every block in the generic body
    if (p.attn.softcap != 0.f || (!Cfg::kMaskInPlainBody && !Cfg::kBitmask && n - 1 >= b.full_end)) return n;
    // Bitmask tiles: their partial blocks run in the plain body too (masked there), so that a mask whose
    // blocks are all partial (a random element mask) keeps the deferred max of the unmasked loop.
    if constexpr (Cfg::kBitmask) return b.begin + (tma_out ? 0 : 1);
    return b.full_run_end(!tma_out);
  };
  auto scores_to_p = [&](const float (&x)[N / 2]) {
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = cuda_backend::pack2<T>(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
  };
  // The TMA-store path of store_output below (two Q buffers only).
  auto stage_and_store = [&](const FwdTileFor<Cfg>& e, int q_buf, float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = e.m0 + row_in_tile + 8 * h;
      if (row >= e.seq.len_q) {  // past seqused: out 0 (out_pair), lse -inf (reference convention)
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
    for (int j = 0; j < DV / 8; j += 2)
      stmatrix_x4(row_base + (j / 8) * Cfg::kQAtomBytes + (((j % 8) * 16) ^ chunk_xor),
                  cuda_backend::out_pair<T>(o[4 * j], o[4 * j + 1], inv[0]),
                  cuda_backend::out_pair<T>(o[4 * j + 2], o[4 * j + 3], inv[1]),
                  cuda_backend::out_pair<T>(o[4 * j + 4], o[4 * j + 5], inv[0]),
                  cuda_backend::out_pair<T>(o[4 * j + 6], o[4 * j + 7], inv[1]));
    fence_smem_for_tma();
    named_bar_sync(kStoreBar + wg, 128);
    if (store_thread) {
      uint8_t* rows = sm.q[q_buf] + wg * 64 * kAtomRowBytes;
#pragma unroll
      for (int a = 0; a < Cfg::kVAtoms; ++a)
        tma_store_4d(to, rows + a * Cfg::kQAtomBytes, a * kAtomCols, e.m0 + wg * 64, e.head, e.seq.batch_coord);
      tma_store_commit();
    }
    q_pending = q_buf;
  };
  // Tile e's output from o and the finished softmax state. The caller keeps e from when the tile
  // was current (re-deriving it from the tile id cost ~100 instructions of integer division, and
  // for varlen two global loads, at every tile boundary).
  auto store_output = [&](const FwdTileFor<Cfg>& e, int q_buf, float (&inv)[2], float (&lse)[2], auto in_stream) {
    if (!tma_out) {
      store_rows<T, Cfg, decltype(in_stream)::value>(sm, p, e, row_in_tile, quad_col, o, inv, lse);
      return;
    }
    if constexpr (Cfg::kQBuffers == 2) stage_and_store(e, q_buf, inv, lse);  // tma_out implies it
  };
  // The next tile that sees keys; tiles that see none (empty window, s_k = 0) get their zero rows
  // and -inf LSE here, with no load and no MMA.
  auto next_keyed_tile = [&]() {
    while (walk.next(p)) {
      if (walk.t.sees_keys()) {
        if constexpr (kBiasRowsPerTile) bias_tile_rows();
        return true;
      }
      if constexpr (Cfg::kBlockList) {
        store_zero_rows<T, Cfg>(p, walk.t, row_in_tile, quad_col);
      } else {
        float zero[DV / 2] = {}, inv[2] = {0.f, 0.f}, lse[2] = {-INFINITY, -INFINITY};
        store_rows<T, Cfg>(sm, p, walk.t, row_in_tile, quad_col, zero, inv, lse);
      }
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
  auto first_block = [&]() { return idle_for<Cfg>(p, walk.t, wg) ? walk.t.blocks.last() : walk.t.blocks.first(); };
  auto skip_idle_blocks = [&](const FwdTileFor<Cfg>& e) {
    if (!idle_for<Cfg>(p, e, wg)) return;
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
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;  // overwritten by the first PV; keeps it defined
    softmax = cuda_backend::OnlineSoftmax<N>{};
    FwdTileFor<Cfg> done;      // the tile whose blocks are all issued, until its output is stored
    int n = first_block();     // the block whose scores are in s
    bool pv_first = true;      // the pending PV (of block n) is its tile's first

    if (Cfg::kPingPong && wg == kWGs - 1) named_bar_arrive(kPingPongBar, 256);
    mbar_wait(&sm.q_full[qs.stage()], qs.phase());
    mbar_wait(&sm.k_full[ps.stage()], ps.phase());
    if (threadIdx.x == 128) split_stamp<Cfg>(kStampFirstK);
    if constexpr (!Cfg::kBitmask) zero_v_past_keys(walk.t.blocks.block(n));
    my_turn();
    issue_qk(ps.stage());
    read_bits(n, ps.stage());
    your_turn(false);
    wgmma_wait<0>();
    fence_operands(s);
    release_qk_operands(n);
    shape_scores(n);
    softmax.step(s, softmax_scale, alpha);
    scores_to_p(s);

    // One block of the stream: QK of block n, PV of the block before it. The generic body handles
    // a new tile's first block (new_tile: the previous tile's softmax is finished and its output
    // stored under this block's softmax), the tile's last (its QK frees the Q buffer), softcap and
    // the mask. The plain body (generic = false) runs the blocks between, back to back, with none
    // of those tests: its loop's only branch on the block is the back edge (FA3 runs masked and
    // unmasked blocks in separate loops too), except that with Cfg::kMaskInPlainBody it also
    // masks the partial blocks above the full range, after one comparison per block. d128
    // causal's second warpgroup: 954 static cycles a block against 985 in the generic body
    // (docs/notes/fwd-sm90.md).
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
        if constexpr (!Cfg::kBitmask) zero_v_past_keys(walk.t.blocks.block(n));
      }
      // In the generic body with ping-pong only the first warpgroup waits for the K/V tiles: the
      // others issue after it (their turn opens once it has issued; the named barrier orders its
      // mbarrier acquire before their wgmma reads), so the tiles have landed by then. In the plain
      // body every warpgroup waits: a wait on a completed phase costs less than the branch around
      // it (d128 +0.5% against the first-only wait there). V is waited for
      // between the two GEMMs, so that its wait runs while QK is on the tensor cores. FA3 does
      // both; measured d128 s8k full +2.5%, the rest within 2%. Three warpgroups wait for V before the turn (Cfg::kVWaitUnderQK).
      // Bitmask configs: every warpgroup, since each reads its bits from the K slot's smem with plain
      // loads (acquired from k_full by itself, not through another warpgroup's turn).
      const bool waits_tiles = !Cfg::kPingPong || wg == 0 || !kGeneric || Cfg::kBitmask;
      if (waits_tiles) {
        mbar_wait(&sm.k_full[ps.stage()], ps.phase());
        if (!Cfg::kVWaitUnderQK) mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      }
      probe.mark(prof::kTilesReady);
      my_turn();
      probe.mark(prof::kTurnTaken);
      issue_qk(ps.stage());
      read_bits(n, ps.stage());  // bitmask only; K (and the bits) waited for above
      if (Cfg::kVWaitUnderQK && waits_tiles) mbar_wait(&sm.v_full[prev.stage()], prev.phase());
      issue_pv(prev.stage(), pv_first);
      pv_first = new_tile;
      your_turn(false);
      probe.mark(prof::kIssued);
      prefetch_bias(n);  // bias kernels only (row 0's loaded pairs fly under the QK)
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
      if constexpr (kGeneric) {
        shape_scores(n);
      } else {
        // Bias kernels only, before the mask (no softcap in the plain body: plain_lo). Plain blocks are
        // full ones (inside the sequence: the window's full range ends at len_k), except a bitmask's
        // partial blocks and, with kMaskInPlainBody, the partial blocks above the full ones: either may
        // be the sequence's last block, whose keys past len_k must not be read.
        add_bias(n, std::bool_constant<!Cfg::kBitmask && !Cfg::kMaskInPlainBody>{});
        if constexpr (Cfg::kMaskInPlainBody) {
          if (walk.t.blocks.above_full(n)) mask_scores(n);  // plain blocks are >= full_begin (plain_lo)
        } else if constexpr (Cfg::kBitmask) {
          if (!walk.t.blocks.full(n)) mask_scores(n);  // no softcap in the plain body (plain_lo)
        }
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
      // max moves only past OnlineSoftmax::kMaxSlack: +2-5% at d128). A fresh tile's
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
        if (new_tile) store_output(done, qs.stage() ^ 1, inv, lse, std::true_type{});
      };
      // A full step: the row maxima, then the exps; O rescaled where a max moved.
      auto full_step = [&](auto&& hook) {
        if constexpr (Cfg::kMaximaFirst)
          softmax.step_maxima_first(s, softmax_scale, alpha, hook);
        else
          softmax.step(s, softmax_scale, alpha, hook);
        scores_to_p(s);
        if (new_max()) cuda_backend::scale_rows<DV>(o, alpha);
      };
      // Plain blocks with Cfg::kDeferredMax take their exps against the running max as it stands,
      // with no max reduction before them (OnlineSoftmax::step_deferred): P is converted beside row
      // 1's exps, and only a warp whose p passed the limit redoes the block, on the kept scores.
      if constexpr (!kGeneric && Cfg::kDeferredMax) {
        float pr[N / 2], sum[2];
        softmax.step_deferred(s, pr, softmax_scale, sum, between_rows);
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
    if (threadIdx.x == 128) split_stamp<Cfg>(kStampLastPv);
    release(&sm.v_empty[ps.stage()]);
    ps.advance();
    float inv[2], lse[2];
    softmax.finish(inv, lse);
    release_stored_q();
    store_output(done, qs.stage(), inv, lse, std::false_type{});
    if (threadIdx.x == 128) split_stamp<Cfg>(kStampStored);
    release_stored_q();
    probe.mark(prof::kEpilogueEnd);
    probe.finish();
    if constexpr (Cfg::kQBuffers == 1) {
      qs.advance();
      more = next_keyed_tile();
    }
  }
}

}  // namespace fastattn::sm90
