// Epilogue of the Hopper backward: dK (times the softmax scale) and dV of a thread's two keys, from
// the accumulator layout by 4-byte stores (d > 128), or at d <= 128 through shared memory (the K / V
// tiles, free once every MMA is done) by 16-byte stores of whole rows; keys past len_k hold 0, keys
// past the sequence are skipped.
#pragma once

#include "cuda/common/math.cuh"  // pack2
#include "cuda/sm90/bwd/smem.cuh"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/bwd/wave_tail.h"
#include "cuda/sm90/prim/regs.cuh"   // named_bar_sync
#include "cuda/sm90/prim/wgmma.cuh"  // smem_addr

namespace fastattn::sm90 {

// dK's NK columns from k_col0 and dV's NV from v_col0 (all of d, or at d > 128 a warpgroup's share;
// they differ where d_v != d_qk: BwdConfig::kDvCols*), each in the first N / 2 registers of its
// accumulator.
template <class T, int NK, int NV, int RK, int RV, class Tile>
__device__ __forceinline__ void store_dk_dv_apart(const BwdParams& p, const Tile& t, int key_row, int quad_col,
                                                  int k_col0, int v_col0, const float (&dk)[RK], const float (&dv)[RV]) {
  static_assert(NK / 2 <= RK && NV / 2 <= RV);
  const int64_t b_off = t.seq.batch_coord;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int j = key_row + 8 * hh;
    if (j >= t.seq.rows_k) continue;
    const int64_t tok = t.seq.k_offset + j;
    T* gk = static_cast<T*>(p.dk) + b_off * p.dk_stride_b + tok * p.dk_stride_s + int64_t(t.kv_head) * p.dk_stride_h;
    T* gv = static_cast<T*>(p.dv) + b_off * p.dv_stride_b + tok * p.dv_stride_s + int64_t(t.kv_head) * p.dv_stride_h;
    // One loop for both, a dK and a dV store per step while both have columns: with equal shares
    // the two stores share their column's address math (two loops cost d 192 / 256 +57-66 instructions).
#pragma unroll
    for (int c = 0; c < (NK > NV ? NK : NV) / 8; ++c) {
      if (c < NK / 8)
        *reinterpret_cast<uint32_t*>(gk + k_col0 + 8 * c + 2 * quad_col) =
            cuda_backend::pack2<T>(dk[4 * c + 2 * hh] * p.scale, dk[4 * c + 2 * hh + 1] * p.scale);
      if (c < NV / 8)
        *reinterpret_cast<uint32_t*>(gv + v_col0 + 8 * c + 2 * quad_col) =
            cuda_backend::pack2<T>(dv[4 * c + 2 * hh], dv[4 * c + 2 * hh + 1]);
    }
  }
}

// Both N columns from col0 (d_v = d_qk).
template <class T, int N, int R, class Tile>
__device__ __forceinline__ void store_dk_dv(const BwdParams& p, const Tile& t, int key_row, int quad_col, int col0,
                                            const float (&dk)[R], const float (&dv)[R]) {
  store_dk_dv_apart<T, N, N, R, R>(p, t, key_row, quad_col, col0, col0, dk, dv);
}

// Rows [row0, row0 + kRows) of dK / dV staged in smem (16-byte chunk k of row r at offset
// chunk_at(r, k) of both tiles) stored as keys n0 + r of dk / dv by kThreads threads (thread tid),
// with 16-byte stores (element stores where dk / dv rows are not 16-byte aligned); keys past the
// sequence are skipped.
template <class T, int kChunks, int kRows, int kThreads, class ChunkAt, class Tile>
__device__ __forceinline__ void store_staged_dk_dv_rows(const BwdParams& p, const Tile& t, uint32_t k_base,
                                                        uint32_t v_base, int row0, int tid, ChunkAt chunk_at) {
  const int64_t b_off = t.seq.batch_coord;
  T* gk0 = static_cast<T*>(p.dk) + b_off * p.dk_stride_b + int64_t(t.kv_head) * p.dk_stride_h;
  T* gv0 = static_cast<T*>(p.dv) + b_off * p.dv_stride_b + int64_t(t.kv_head) * p.dv_stride_h;
  const bool vec = ((reinterpret_cast<uintptr_t>(gk0) | reinterpret_cast<uintptr_t>(gv0)) % 16 == 0) &&
                   (p.dk_stride_s * int64_t(sizeof(T))) % 16 == 0 && (p.dv_stride_s * int64_t(sizeof(T))) % 16 == 0;
#pragma unroll
  for (int e = tid; e < kRows * kChunks; e += kThreads) {
    const int r = row0 + e / kChunks, k = e % kChunks, j = t.n0 + r;
    if (j >= t.seq.rows_k) continue;
    const int64_t tok = t.seq.k_offset + j;
    const uint32_t at = chunk_at(r, k);
    uint4 kx, vx;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(kx.x), "=r"(kx.y), "=r"(kx.z), "=r"(kx.w) : "r"(k_base + at));
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(vx.x), "=r"(vx.y), "=r"(vx.z), "=r"(vx.w) : "r"(v_base + at));
    T* gk = gk0 + tok * p.dk_stride_s + 8 * k;
    T* gv = gv0 + tok * p.dv_stride_s + 8 * k;
    if (vec) {  // by asm: from plain uint4 stores nvcc emitted four 4-byte stores here
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(gk), "r"(kx.x), "r"(kx.y), "r"(kx.z), "r"(kx.w) : "memory");
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(gv), "r"(vx.x), "r"(vx.y), "r"(vx.z), "r"(vx.w) : "memory");
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        gk[i] = reinterpret_cast<const T*>(&kx)[i];
        gv[i] = reinterpret_cast<const T*>(&vx)[i];
      }
    }
  }
}

// d <= 128: warpgroup wg's 64 keys of dK and dV, staged in the K and V tiles as rows of D elements
// (16-byte chunks xor-swizzled by the row within whole groups of eight, so that a warp's 4-byte
// writes of eight rows and its 16-byte reads of a row fall in distinct banks), then stored by rows
// with 16-byte stores (element stores where dk / dv rows are not 16-byte aligned). At 1k keys a
// CTA's 4-byte stores were ~20% of the main kernel's samples (lg throttle and drain; notes).
// The caller has made sure that no MMA reads K or V any more (both warpgroups past their last one).
// %tid.x read afresh (volatile): the paired key blocks' second epilogue takes its thread index so,
// else ptxas shares the first epilogue's addresses with it and holds them across the second tile's
// steps (d 128: 8 B spilled).
__device__ __forceinline__ uint32_t tid_x_fresh() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// tid_x: threadIdx.x (or tid_x_fresh()).
template <class T, int D, class Tile>
__device__ __forceinline__ void store_dk_dv_staged(const BwdParams& p, const Tile& t, uint8_t* k_tile,
                                                   uint8_t* v_tile, int wg, uint32_t tid_x, const float (&dk)[D / 2],
                                                   const float (&dv)[D / 2]) {
  constexpr int kRowBytes = D * int(sizeof(T)), kChunks = kRowBytes / 16;
  auto swz = [](int row, int chunk) {  // swizzled within whole 8-chunk groups only (d 96: the last 4 stay)
    return (chunk | 7) < kChunks ? chunk ^ (row % 8) : chunk;
  };
  const int tid = tid_x % 128, lane = tid % 32, quad_col = lane % 4;
  const int row0 = 64 * wg + (tid / 32) * 16 + lane / 4;  // this thread's keys in the tile: row0, row0 + 8
  const uint32_t k_base = smem_addr(k_tile), v_base = smem_addr(v_tile);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = row0 + 8 * hh;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {  // columns 8 c + 2 quad_col, + 1: chunk c of the row, bytes 4 quad_col
      const uint32_t at = r * kRowBytes + swz(r, c) * 16 + 4 * quad_col;
      const uint32_t kv = cuda_backend::pack2<T>(dk[4 * c + 2 * hh] * p.scale, dk[4 * c + 2 * hh + 1] * p.scale);
      const uint32_t vv = cuda_backend::pack2<T>(dv[4 * c + 2 * hh], dv[4 * c + 2 * hh + 1]);
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(k_base + at), "r"(kv) : "memory");
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(v_base + at), "r"(vv) : "memory");
    }
  }
  named_bar_sync(kBwdEpiBar + wg, 128);  // this warpgroup's rows are staged (only it reads them)
  store_staged_dk_dv_rows<T, kChunks, 64, 128>(p, t, k_base, v_base, 64 * wg, tid,
                                               [&](int r, int k) { return uint32_t(r * kRowBytes + swz(r, k) * 16); });
}

// A piece of a split tile (wave_tail.h), once both warpgroups are past their last MMA: its dK / dV partial
// to its run of the workspace in the consumers' register order (float4 chunk c of consumer thread ct at
// 4 (256 c + ct) floats: a warp's chunk is 512 contiguous bytes; `chunk(c)`: the thread's four floats of chunk
// c, kChunks of them: bwd_tail_run_chunks, the run the host sized), then the count; the tile's last piece to finish takes the
// sum of every run, in piece order (the same bits whichever piece is last), into the registers, and stores as
// a whole tile does. Consumer thread 0 posts whether it counted the last piece (`post(last)`), and
// `verdict()` hands that to every consumer thread (a barrier among the 256). Returns whether this CTA stores.
template <int kChunks, class Chunk, class Post, class Verdict>
__device__ __forceinline__ bool bwd_tail_gather_runs(const BwdParams& p, int slot, int piece, Chunk chunk, Post post,
                                                     Verdict verdict) {
  const int ct = int(threadIdx.x) - 128;  // the consumer threads: 128 .. 383
  constexpr int64_t kRun = int64_t(256) * kChunks;  // float4s a run
  float4* const runs = reinterpret_cast<float4*>(p.tail_runs) + int64_t(slot) * p.tail_pieces * kRun + ct;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const float* f = chunk(c);
    __stcg(runs + piece * kRun + 256 * c, make_float4(f[0], f[1], f[2], f[3]));
  }
  // The count by one thread behind the consumers' barrier, acq_rel: its release orders the partials that the
  // barrier showed it, its acquire the other pieces' partials ahead of the barrier the readers pass (dq.cuh's
  // semaphores do the same). No fence of its own: a gpu-scope fence in the kernel made ptxas issue d 64's dQ
  // reductions as returning atomics (ATOMG for REDG, +28 % time; notes, session 48).
  named_bar_sync(kBwdDsBar, 256);
  if (ct == 0) {
    int done;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(done) : "l"(p.tail_count + slot) : "memory");
    post(done == p.tail_pieces - 1);
  }
  if (!verdict()) return false;
  // Chunk by chunk, a loop over the runs (unrolled, the runs' loads were ~1000 instructions).
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    float4 sum = __ldcg(runs + 256 * c);
#pragma unroll 1
    for (int j = 1; j < p.tail_pieces; ++j) {
      const float4 v = __ldcg(runs + j * kRun + 256 * c);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    float* f = chunk(c);
    f[0] = sum.x;
    f[1] = sum.y;
    f[2] = sum.z;
    f[3] = sum.w;
  }
  return true;
}

// kernel.cuh's form: dK, dV (R floats each) over the whole head dim; the item from smem, whose word then
// carries the verdict (nothing reads the item after the start).
template <int R>
__device__ __forceinline__ bool bwd_tail_gather(uint32_t item_addr, const BwdParams& p, float (&dk)[R], float (&dv)[R]) {
  static_assert(R % 4 == 0);
  constexpr int kChunks = R / 2;  // dK's R / 4 float4 chunks, then dV's
  int item, tile_item, slot, piece;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(item) : "r"(item_addr));
  bwd_tail_item(item, p.tail_from, p.tail_pieces, tile_item, slot, piece);
  if (slot < 0) return true;
  auto chunk = [&](int c) -> float* { return c < kChunks / 2 ? &dk[4 * c] : &dv[4 * (c - kChunks / 2)]; };
  auto post = [&](bool last) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(item_addr), "r"(last ? 1 : 0) : "memory");
  };
  auto verdict = [&] {
    named_bar_sync(kBwdDsBar, 256);
    int last;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(last) : "r"(item_addr));
    return last != 0;
  };
  return bwd_tail_gather_runs<kChunks>(p, slot, piece, chunk, post, verdict);
}

}  // namespace fastattn::sm90
