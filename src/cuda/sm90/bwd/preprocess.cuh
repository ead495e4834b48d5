// The backward's two small kernels around the main one:
//   preprocess: per (q-block of the config's kBlockM rows, q head, sequence) D = rowsum(dO * O) in
//     fp32 and the forward's lse in log2 units, both into the padded workspace (+inf lse and D = 0
//     for rows past the used ones and rows that kept no key, so their P is exactly 0; d 64 in the
//     main kernel's read order, bwd_stat_slot), and the q-block's dQ accumulator run cleared;
//     with the dQ ring (dq_ring.h) instead of the run's clear: the ring's slots, the q-block's visit
//     and arrival counts, the CTA ticket, and dq = 0 where no key block works on the q-block;
//   postprocess: dq = scale * dQ accumulator, from its fragment order into dq's strides, per 64
//     rows (a 128-row q-block's run is two 64-row runs: dq_layout.h), or per 80-row q-block (dQ^T).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/bwd_seq.cuh"
#include "cuda/common/grid_dependency.cuh"
#include "cuda/common/math.cuh"  // pack2
#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/bwd/dq_layout.h"
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/wave_tail.h"

namespace fastattn::sm90 {

constexpr int kBwdAuxThreads = 256;

// The workspace slot of row r of a q-block's lse / D: r itself, or with BwdConfig::kStatsByQuad
// row 8 jj + 2 qc + e of each 16 at 4 qc + 2 jj + e (the main kernel reads a quad column's four at once).
template <class Cfg>
__device__ __forceinline__ int bwd_stat_slot(int r) {
  if constexpr (!Cfg::kStatsByQuad) return r;
  return (r & ~15) | ((r >> 1 & 3) << 2) | ((r >> 3 & 1) << 1) | (r & 1);
}

// The dQ ring's preparation by preprocess CTA (m, h, b), before any early return (every used position
// has its CTA; positions of a narrow last section's missing units are never waited on: dq_ring.h):
// the held slots from the CTA's linear index on, the grid's size apart, cleared; the
// q-block's position gets its visit count (the same per-key-block q-blocks as the main kernel's
// tile) and its initial arrival count (free at once with one visitor or none: dq_ring.h); CTA 0
// resets the ticket. A q-block that no key block works on (rows that keep no key) gets dq = 0 here,
// as element pairs (the ring's rule: dq pair-aligned).
template <class T, class Cfg>
__device__ __forceinline__ void bwd_ring_prepare(const cuda_backend::BwdParams& p, const cuda_backend::BwdSeq& seq,
                                                 int m, int h, int b) {
  constexpr int D = Cfg::kHeadDim, kRows = Cfg::kBlockM, kRunFloat4s = kRows * D / 4;
  using Ring = BwdConfig<D, kRows>;  // the ring's main kernel: its key blocks are the visitors counted
  static_assert(Ring::kHasRingKernel, "the dQ ring runs on the d 128 64-row tile");
  const int64_t cta = (int64_t(b) * gridDim.y + h) * gridDim.x + m, ctas = int64_t(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t held = bwd_ring_slots_held(
      p.dq_ring_slots, bwd_ring_positions(p.attn.heads_kv * p.attn.batch, p.attn.q_per_kv, p.m_blocks, p.ring_section));
  for (int64_t s = cta; s < held; s += ctas) {
    float4* slot = reinterpret_cast<float4*>(p.dq_ring + s * (kRows * D));
    for (int f = threadIdx.x; f < kRunFloat4s; f += kBwdAuxThreads) slot[f] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, p.attn.window_left, p.attn.window_right};
  const int need = bwd_q_block_visits(mask, m, Ring::kBlockN, kRows);
  if (threadIdx.x == 0) {
    const int64_t at = bwd_ring_position(b, h, m, p.attn.heads_kv, p.attn.q_per_kv, p.m_blocks, p.ring_section);
    p.dq_ring_need[at] = need;
    p.dq_ring_count[at] = bwd_ring_initial_count(need);
    if (cta == 0) *p.tile_ticket = 0;
  }
  const int rows = min(kRows, seq.rows_q - m * kRows);
  if (need > 0 || rows <= 0) return;
  T* dq = static_cast<T*>(p.dq) + int64_t(seq.batch_coord) * p.dq_stride_b +
          int64_t(seq.q_offset + m * kRows) * p.dq_stride_s + int64_t(h) * p.dq_stride_h;
  for (int e = threadIdx.x; e < rows * D / 2; e += kBwdAuxThreads)
    *reinterpret_cast<uint32_t*>(dq + (e / (D / 2)) * p.dq_stride_s + 2 * (e % (D / 2))) = 0u;
}

// The recompute band's preparation (band.h: no accumulator, no ring, no ticket): dq = 0 as element
// pairs for a q-block that no key block works on, as the ring's preparation does (the band kernel
// stores every visited one).
template <class T, class Cfg>
__device__ __forceinline__ void bwd_band_prepare(const cuda_backend::BwdParams& p, const cuda_backend::BwdSeq& seq,
                                                 int m, int h) {
  constexpr int D = Cfg::kHeadDim, kRows = Cfg::kBlockM;
  static_assert(BwdConfig<D, kRows>::kHasRingKernel, "the band runs on the d 128 64-row tile");
  const cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, p.attn.window_left, p.attn.window_right};
  const int rows = min(kRows, seq.rows_q - m * kRows);
  if (rows <= 0 || bwd_q_block_visits(mask, m, BwdConfig<D, kRows>::kBlockN, kRows) > 0) return;
  T* dq = static_cast<T*>(p.dq) + int64_t(seq.batch_coord) * p.dq_stride_b +
          int64_t(seq.q_offset + m * kRows) * p.dq_stride_s + int64_t(h) * p.dq_stride_h;
  for (int e = threadIdx.x; e < rows * D / 2; e += kBwdAuxThreads)
    *reinterpret_cast<uint32_t*>(dq + (e / (D / 2)) * p.dq_stride_s + 2 * (e % (D / 2))) = 0u;
}

// What the preprocess takes from a config: its layout (head dims: dQ's run d_qk, O / dO's d_v; q-block
// rows, stats order), so that configs sharing it (the d 256 64- and 80-key tiles) share one preprocess instance.
template <int D_, int BlockM, bool StatsByQuad, int DV_ = D_>
struct BwdStatsLayout {
  static constexpr int kHeadDim = D_, kHeadDimV = DV_, kBlockM = BlockM;
  static constexpr bool kStatsByQuad = StatsByQuad;
};
template <class Cfg>
using BwdStatsLayoutOf = BwdStatsLayout<Cfg::kHeadDim, Cfg::kBlockM, Cfg::kStatsByQuad, Cfg::kHeadDimV>;

// Each row's D from 16-byte loads: a row is kRowLanes lanes (the power of two that covers d_v / 8), a
// warp takes 32 / kRowLanes rows at a time. The CTA also clears its q-block's dQ accumulator run
// (one float4 store per 16 bytes): fused here, the memset of the whole accumulator before it cost a
// pass of its own over as many bytes. Rows of o / dO that are not 16-byte aligned (strided views)
// are read element by element in the same lane order. kRing: the dQ ring's preparation instead of
// the clear (bwd_ring_prepare).
// kBand: the recompute band's preparation instead (bwd_band_prepare; bwd_band_preprocess_kernel).
template <class T, class Cfg, bool kRing, bool kBand>
__device__ __forceinline__ void bwd_preprocess_rows(const cuda_backend::BwdParams& p) {
  constexpr int D = Cfg::kHeadDim, kRows = Cfg::kBlockM;  // the main kernel's q-block: all its rows are written
  constexpr int DV = Cfg::kHeadDimV;            // O and dO: D = rowsum(dO * O) over d_v
  constexpr int kVec = 16 / int(sizeof(T));     // elements per 16-byte load
  constexpr int kRowLanes = DV / kVec <= 8 ? 8 : DV / kVec <= 16 ? 16 : 32;
  constexpr int kRowsPerWarp = 32 / kRowLanes, kWarps = kBwdAuxThreads / 32;
  static_assert(DV % kVec == 0 && DV / kVec <= 32 && kRows % (kWarps * kRowsPerWarp) == 0);
  // The main kernel may be scheduled now: it waits on the device for this grid's end.
  cuda_backend::grid_dependents_launch();
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const cuda_backend::BwdSeq seq(p, b, kRows);
  if constexpr (kRing) bwd_ring_prepare<T, Cfg>(p, seq, m, h, b);
  if constexpr (kBand) bwd_band_prepare<T, Cfg>(p, seq, m, h);
  if constexpr (!kRing && !kBand) {  // the wave tail's counts (wave_tail.h): one per split tile
    if (p.tail_count != nullptr && (blockIdx.x | blockIdx.y | blockIdx.z) == 0) {
      const int slots = bwd_tail_slots(p);
      for (int i = threadIdx.x; i < slots; i += kBwdAuxThreads) p.tail_count[i] = 0;
    }
  }
  if (m * kRows >= seq.rows_q) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane % kRowLanes;
  const int64_t b_off = seq.batch_coord;
  const int64_t ws = int64_t(h) * p.padded_rows + seq.padded_q + m * kRows;
  const T* o_h = static_cast<const T*>(p.attn.out) + b_off * p.attn.out_stride_b + h * p.attn.out_stride_h;
  const T* g_h = static_cast<const T*>(p.dout) + b_off * p.dout_stride_b + h * p.dout_stride_h;
  const bool vec = ((reinterpret_cast<uintptr_t>(o_h) | reinterpret_cast<uintptr_t>(g_h)) % 16 == 0) &&
                   (p.attn.out_stride_s % kVec == 0) && (p.dout_stride_s % kVec == 0);
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kIters = kRows / (kWarps * kRowsPerWarp);
  static_assert(kRows <= kBwdAuxThreads, "a thread per row's lse");
  // Row threadIdx.x's lse, loaded first (coalesced, a thread a row) and stored last: it needs no sum,
  // so its load is in flight with O's and dO's instead of after the sums.
  const int lse_row = m * kRows + threadIdx.x;
  float lse = INFINITY;  // rows past the used ones, and a row that kept no key: P = exp2(s - inf) = 0
  if (threadIdx.x < kRows && lse_row < seq.len_q)
    lse = p.attn.lse[b_off * p.attn.lse_stride_b + int64_t(h) * p.attn.lse_stride_h +
                     (seq.q_offset + lse_row) * p.attn.lse_stride_s];
  // All the CTA's loads first (kIters rows per lane), then the sums: the loads are all in flight.
  uint4 ov[kIters], gv[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = m * kRows + (it * kWarps + warp) * kRowsPerWarp + lane / kRowLanes;
    ov[it] = gv[it] = make_uint4(0, 0, 0, 0);
    if (i < seq.len_q && sub * kVec < DV) {
      const int64_t tok = seq.q_offset + i;
      const T* o = o_h + tok * p.attn.out_stride_s + sub * kVec;
      const T* g = g_h + tok * p.dout_stride_s + sub * kVec;
      if (vec) {
        ov[it] = *reinterpret_cast<const uint4*>(o);
        gv[it] = *reinterpret_cast<const uint4*>(g);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          reinterpret_cast<T*>(&ov[it])[e] = o[e];
          reinterpret_cast<T*>(&gv[it])[e] = g[e];
        }
      }
    }
  }
  if constexpr (!kRing && !kBand) {
    float4* run = reinterpret_cast<float4*>(p.dq_accum + ws * D);  // cleared while the loads are in flight
#pragma unroll 4
    for (int f = threadIdx.x; f < kRows * D / 4; f += kBwdAuxThreads) run[f] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int r = (it * kWarps + warp) * kRowsPerWarp + lane / kRowLanes;
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      acc += float(reinterpret_cast<const T*>(&ov[it])[e]) * float(reinterpret_cast<const T*>(&gv[it])[e]);
#pragma unroll
    for (int off = kRowLanes / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (sub == 0) p.dpsum[ws + bwd_stat_slot<Cfg>(r)] = acc;
  }
  if (threadIdx.x < kRows) p.lse_log2[ws + bwd_stat_slot<Cfg>(threadIdx.x)] = lse == -INFINITY ? INFINITY : lse * kLog2e;
}
template <class T, class Cfg, bool kRing = false>
__global__ void __launch_bounds__(kBwdAuxThreads) bwd_preprocess_kernel(const __grid_constant__ cuda_backend::BwdParams p) {
  bwd_preprocess_rows<T, Cfg, kRing, false>(p);
}
// The recompute band's preprocess (a kernel of its own: the other two keep their code).
template <class T, class Cfg>
__global__ void __launch_bounds__(kBwdAuxThreads)
    bwd_band_preprocess_kernel(const __grid_constant__ cuda_backend::BwdParams p) {
  bwd_preprocess_rows<T, Cfg, false, true>(p);
}

// dq = scale * the q-block's accumulator, through smem: float4 loads in the accumulator's own order
// (coalesced; each holds two pairs of columns, dq_layout.h), rounded pairs into a row-major kRunRows
// x D tile, then each row of dq (contiguous) stored in 16-byte pieces. Read straight from the
// fragment order, a warp's stores would be pieces of eight rows, one row stride apart. The tile's
// rows are padded by 16 bytes, so that a warp's eight rows fall in different banks. One CTA per run:
// 64 rows (blockIdx.x counts 64-row blocks also where the main kernel's q-blocks have 128), or a
// whole 80-row q-block, whose dQ^T float4s hold pairs of rows (stored element by element).
template <class T, class Cfg>
__global__ void __launch_bounds__(kBwdAuxThreads) bwd_postprocess_kernel(const __grid_constant__ cuda_backend::BwdParams p) {
  constexpr int D = Cfg::kHeadDim, kRunRows = Cfg::kDqTransposed ? Cfg::kBlockM : 64;
  constexpr int kRowBytes = D * int(sizeof(T)) + 16, kChunks = D * int(sizeof(T)) / 16;
  __shared__ alignas(16) uint8_t tile[kRunRows * kRowBytes];
  cuda_backend::grid_dependency_wait();  // launched early behind the main kernel: its dQ adds are complete
  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const cuda_backend::BwdSeq seq(p, b, Cfg::kBlockM);
  if (m * kRunRows >= seq.rows_q) return;
  const float4* acc =
      reinterpret_cast<const float4*>(p.dq_accum + (int64_t(h) * p.padded_rows + seq.padded_q + m * kRunRows) * D);
  constexpr int kLoads = kRunRows * D / 4 / kBwdAuxThreads;  // float4s per thread
  static_assert(kRunRows * D / 4 % kBwdAuxThreads == 0, "whole float4s per thread");
  float4 xs[kLoads];  // all of the thread's loads in flight before the first smem store
#pragma unroll
  for (int i = 0; i < kLoads; ++i) xs[i] = acc[threadIdx.x + i * kBwdAuxThreads];
  __syncwarp();  // keeps ptxas from sinking the later loads behind the first stores (one round trip each)
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int f = threadIdx.x + i * kBwdAuxThreads;
    const float4 x = xs[i];
    if constexpr (Cfg::kDqTransposed) {
      // d 192 (the 80-key tile): f = tid + 256 i is float4 tid + 256 (i % kPer) of slice i / kPer
      // (dq_t_accum_quad), so the thread's (row, col) moves by constants from its first float4's. From f as a
      // whole, ptxas held d 192's twelve addresses beside the loads in 64 registers and spilled 16 B; at
      // d 256 this form is the one that spills (64 B), so d 256 / d 128 keep the other.
      constexpr int kPer = 16 * kRunRows / kBwdAuxThreads;
      static_assert(D != 192 || 16 * kRunRows % kBwdAuxThreads == 0, "whole slices of the run per kPer loads");
      DqPairs e;
      if constexpr (D == 192) {
        const DqPairs e0 = dq_t_accum_quad(int(threadIdx.x), kRunRows);
        e = {e0.row + 16 * (i % kPer), e0.col + 64 * (i / kPer)};
      } else {
        e = dq_t_accum_quad(f, kRunRows);
      }
      T* at = reinterpret_cast<T*>(tile + e.row * kRowBytes) + e.col;
      T* below = reinterpret_cast<T*>(tile + (e.row + 1) * kRowBytes) + e.col;
      at[0] = T(p.scale * x.x);
      below[0] = T(p.scale * x.y);
      at[8] = T(p.scale * x.z);
      below[8] = T(p.scale * x.w);
    } else {
      const DqPairs e = dq_accum_pairs(f, Cfg::kDqCols0);
      uint8_t* at = tile + e.row * kRowBytes + e.col * int(sizeof(T));
      *reinterpret_cast<uint32_t*>(at) = cuda_backend::pack2<T>(p.scale * x.x, p.scale * x.y);
      *reinterpret_cast<uint32_t*>(at + 8 * kRowBytes) = cuda_backend::pack2<T>(p.scale * x.z, p.scale * x.w);
    }
  }
  __syncthreads();
  const int rows = min(kRunRows, seq.rows_q - m * kRunRows);
  for (int e = threadIdx.x; e < rows * kChunks; e += kBwdAuxThreads) {
    const int r = e / kChunks, k = e % kChunks;
    const int64_t tok = seq.q_offset + m * kRunRows + r;
    T* row = static_cast<T*>(p.dq) + int64_t(seq.batch_coord) * p.dq_stride_b + tok * p.dq_stride_s + int64_t(h) * p.dq_stride_h;
    const uint4 v = *reinterpret_cast<const uint4*>(tile + r * kRowBytes + 16 * k);
    if (reinterpret_cast<uintptr_t>(row) % 16 == 0) {
      reinterpret_cast<uint4*>(row)[k] = v;
    } else {  // dq's rows only 2-byte aligned (a strided view): element by element
      const T* src = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int i = 0; i < 8; ++i) row[8 * k + i] = src[i];
    }
  }
}

}  // namespace fastattn::sm90
