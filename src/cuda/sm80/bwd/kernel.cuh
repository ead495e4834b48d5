// The Ampere backward kernel (FA2's algorithm): one CTA per (key block of 128, KV head, sequence).
// K and V land in smem once; the CTA walks the q-blocks of 64 rows that the mask keeps for its keys,
// for every q head of its KV head's group (so dK and dV sum over the group in registers, as on sm90),
// each q-block's Q, dO, lse_log2 and D loading by cp.async one step ahead. Per step each warp, on its
// own 16 keys:
//   S^T = K Q^T, P^T = exp2(S^T scale_log2 - lse_log2)   (the forward's softmax, from its saved lse)
//   dP^T = V dO^T, dV += P^T dO, dS^T = P^T (dP^T - D), dK += dS^T Q
// with P^T and dS^T fed from the accumulator registers into the next mma's A operand; dS^T also goes
// to smem, and after a barrier the 8 warps compute dQ = dS K (4 x 2 tiles of 16 rows x d / 2) and add
// it into the q-block's fp32 accumulator run (atomics; the run's fragment order is the Hopper
// kernels', dq_layout.h, whose m16 C layout is mma.sync's too, so their postprocess serves).
// Partial q-blocks (the mask's edge, sequence ends) mask by element; rows past len_q have
// lse_log2 = +inf in the workspace (P = 0) and zero Q / dO.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/bwd_seq.cuh"
#include "cuda/common/math.cuh"
#include "cuda/common/online_softmax.cuh"  // fast_exp2
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm80/bwd/config.h"
#include "cuda/sm80/bwd/params.h"
#include "cuda/sm80/prim/mma.cuh"
#include "cuda/sm80/prim/smem_tile.cuh"

namespace fastattn::sm80 {

// The lane id as a value the compiler cannot trace (each call a new one): the ldmatrix addresses a
// helper derives from it are computed in that helper and die there, instead of being hoisted out of
// the step loop and held through the whole step (~20 registers, which spilled at both head dims).
__device__ __forceinline__ int opaque_lane(int lane) {
  int r;
  asm volatile("mov.u32 %0, %1;\n" : "=r"(r) : "r"(lane));
  return r;
}

// acc (16 rows x kCols, m16n8 C layout: acc[4 j + 2 h + e] = row g + 8 h, column 8 j + 2 t + e) +=
// A B^T over k = D, A's 16 rows from the swizzled tile at `a_tile` (row `a_row0`..), B's kCols rows
// from `b_tile`: S^T = K Q^T, and dP^T = V dO^T 16 columns at a time. Per k16 step one ldmatrix of A feeds kCols / 8 mma.
template <class T, class Cfg, int kCols>
__device__ __forceinline__ void mma_abt(float (&acc)[kCols / 2], uint32_t a_tile, int a_row0, uint32_t b_tile,
                                        int lane) {
  constexpr int RB = Cfg::kRowBytes;
  const int x = lane & 7;
  // In-tile offsets of the lane's k-step 0: chunk (2 kk + half) ^ x is (half ^ x) ^ 2 kk, and a row
  // offset (a multiple of RB >= 128) has no bit of a chunk, so a k-step's address is one XOR of it.
  const uint32_t a_off = uint32_t((a_row0 + (lane & 15)) * RB + (((lane >> 4) ^ x) << 4));
  const uint32_t b_off = uint32_t(((lane >> 4) * 8 + x) * RB + ((((lane >> 3) & 1) ^ x) << 4));
#pragma unroll
  for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
    uint32_t af[4];
    ldmatrix_x4(af, a_tile + (a_off ^ (kk << 5)));
#pragma unroll
    for (int np = 0; np < kCols / 16; ++np) {
      uint32_t bf[4];
      ldmatrix_x4(bf, b_tile + np * 16 * RB + (b_off ^ (kk << 5)));
      mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * np]), af, bf[0], bf[1]);
      mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * np + 4]), af, bf[2], bf[3]);
    }
  }
}

// acc (16 rows x D, C layout) += A B for one k16 step: A = a 16 x 16 fragment of T pairs packed from
// the C layout (a[0..1]: its first n8 tile, a[2..3]: the second, which is the A layout), B 16 rows of
// the tile at `b_rows` (dO or Q, rows = q rows) read transposed.
template <class T, class Cfg>
__device__ __forceinline__ void mma_frag_b(float (&acc)[Cfg::kHeadDim / 2], const uint32_t* a, uint32_t b_rows, int lane) {
  constexpr int RB = Cfg::kRowBytes;
  const int x = lane & 7;
  const uint32_t b_off = uint32_t((x + ((lane >> 3) & 1) * 8) * RB + (((lane >> 4) ^ x) << 4));  // as in mma_abt
  const uint32_t af[4] = {a[0], a[1], a[2], a[3]};
#pragma unroll
  for (int dp = 0; dp < Cfg::kHeadDim / 16; ++dp) {
    uint32_t bf[4];
    ldmatrix_x4_trans(bf, b_rows + (b_off ^ (dp << 5)));
    mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * dp]), af, bf[0], bf[1]);
    mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * dp + 4]), af, bf[2], bf[3]);
  }
}

using cuda_backend::unpack2;  // the two floats of a packed T pair

// dQ's part of warp (wm, wn): rows 16 wm .. of the q-block, columns wn D / 2 .., over the 128 keys:
// A = dS from the dS^T tile read transposed, B = K read transposed; then added into the q-block's
// accumulator run at its fragment-order offsets (dq_layout.h: 512 J + 128 wm + 4 lane + i for
// n-tile J), four consecutive floats a fragment.
template <class T, class Cfg>
__device__ __forceinline__ void dq_add(float* run, uint32_t ds_tile, uint32_t k_tile, int warp, int lane) {
  constexpr int D = Cfg::kHeadDim, RB = Cfg::kRowBytes, kTiles = D / 16;  // n8 tiles a warp (half of d)
  const int wm = warp & 3, wn = warp >> 2, x = lane & 7;
  float acc[kTiles * 4];
#pragma unroll
  for (int j = 0; j < kTiles * 4; ++j) acc[j] = 0.f;
  const uint32_t a_row = uint32_t((x + (lane >> 4) * 8) * Sm80DsTile::kRowBytes);
  const int a_chunk = 2 * wm + ((lane >> 3) & 1);
  const uint32_t b_off = uint32_t((x + ((lane >> 3) & 1) * 8) * RB + (((lane >> 4) ^ x) << 4));  // as in mma_abt
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
    uint32_t af[4];
    ldmatrix_x4_trans(af, ds_tile + kk * 16 * Sm80DsTile::kRowBytes + a_row + ((a_chunk ^ x) << 4));
#pragma unroll
    for (int dp = 0; dp < kTiles / 2; ++dp) {
      uint32_t bf[4];
      const int c = wn * (kTiles / 2) + dp;  // 16-column pair of d
      ldmatrix_x4_trans(bf, k_tile + kk * 16 * RB + (b_off ^ (c << 5)));
      mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * dp]), af, bf[0], bf[1]);
      mma16816<T>(*reinterpret_cast<float(*)[4]>(&acc[8 * dp + 4]), af, bf[2], bf[3]);
    }
  }
  float* at = run + 512 * (wn * kTiles) + 128 * wm + 4 * lane;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) atomicAdd(at + 512 * j + i, acc[4 * j + i]);
}

// What the step loop reads of its CTA (in smem: Sm80BwdStepInfo info_s in the kernel).
struct Sm80BwdStepInfo {
  int64_t q_seq, do_seq;  // element offsets of the sequence's first row in q and dout (head 0)
  int padded_q, len_q, steps;
  cuda_backend::BlockRange q_blocks;
  // Step s's (q head, q-block) at slot s % 2: thread 0 writes step s + 1's while step s runs, from
  // step s's by one increment (no division of s by the blocks a head; the slot it overwrites was last
  // read in step s - 1, before step s's first barrier).
  int2 head_block[2];
  // Workspace row of q-block m of q head h: its lse_log2 / D there, and times d its dQ accumulator run.
  __device__ __forceinline__ int64_t ws_row(const cuda_backend::BwdParams& bp, int h, int m) const {
    return int64_t(h) * bp.padded_rows + padded_q + int64_t(m) * 64;
  }
};

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) bwd_kernel(const __grid_constant__ Sm80BwdParams p) {
  constexpr int D = Cfg::kHeadDim, BN = Cfg::kBlockN, BM = Cfg::kBlockM, S = Cfg::kStages;
  static_assert(BM == 64, "Sm80BwdStepInfo::ws_row counts 64-row q-blocks");
  extern __shared__ __align__(128) uint8_t smem_raw[];
  const uint32_t k_s = smem_u32(smem_raw), v_s = k_s + Cfg::kKBytes;
  const uint32_t q_s = v_s + Cfg::kKBytes;         // stage st at q_s + st * kQBytes
  const uint32_t do_s = q_s + S * Cfg::kQBytes;    // likewise
  const uint32_t ds_s = do_s + S * Cfg::kQBytes;
  const int stats_at = 2 * Cfg::kKBytes + 2 * S * Cfg::kQBytes + Cfg::kDsBytes;
  const float* stats = reinterpret_cast<const float*>(smem_raw + stats_at);  // stage st: lse_log2 [BM], D [BM]

  const cuda_backend::BwdParams& bp = p.bwd;
  const cuda_backend::AttnParams& a = bp.attn;
  const int n_block = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z;
  const cuda_backend::BwdSeq seq(bp, b, BM);
  const int n0 = n_block * BN;
  if (n0 >= seq.rows_k) return;  // a varlen sequence shorter than the longest
  const cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, a.window_left, a.window_right};
  const cuda_backend::BlockRange q_blocks = cuda_backend::query_blocks(mask, n0, n0 + BN, BM);
  const int steps = q_blocks.empty() ? 0 : q_blocks.count() * a.q_per_kv;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int kw = warp * Cfg::kKeysPerWarp;  // the warp's keys in the block
  const int64_t bc = seq.batch_coord;
  const char* k_slice = static_cast<const char*>(p.k.data) +
                        2 * (bc * p.k.stride_b + int64_t(seq.k_offset) * p.k.stride_s + int64_t(kv_head) * p.k.stride_h);
  const char* v_slice = static_cast<const char*>(p.v.data) +
                        2 * (bc * p.v.stride_b + int64_t(seq.k_offset) * p.v.stride_s + int64_t(kv_head) * p.v.stride_h);
  // The step loop's per-CTA facts, in smem: read there at each step (after the step's barrier), they
  // hold no registers across the loop (held in registers, ~15 of them spilled beside the math).
  __shared__ Sm80BwdStepInfo info_s;
  Sm80BwdStepInfo info;
  info.q_seq = bc * p.q.stride_b + int64_t(seq.q_offset) * p.q.stride_s;
  info.do_seq = bc * bp.dout_stride_b + int64_t(seq.q_offset) * bp.dout_stride_s;
  info.padded_q = seq.padded_q;
  info.len_q = seq.len_q;
  info.steps = steps;
  info.q_blocks = q_blocks;
  info.head_block[0] = make_int2(kv_head * a.q_per_kv, q_blocks.begin);  // step 0: the group's first head
  if (threadIdx.x == 0) info_s = info;  // visible to all at the loop's first barrier
  // Step s's loads into stage s % S: q head h, q-block m.
  auto load_step = [&](const Sm80BwdStepInfo& in, int h, int m, int s) {
    const int st = s % S;
    const char* q_slice = static_cast<const char*>(p.q.data) + 2 * (in.q_seq + int64_t(h) * p.q.stride_h);
    const char* do_slice = static_cast<const char*>(bp.dout) + 2 * (in.do_seq + int64_t(h) * bp.dout_stride_h);
    load_rows<Cfg, BM>(q_s + st * Cfg::kQBytes, q_slice, 2 * p.q.stride_s, m * BM, in.len_q);
    load_rows<Cfg, BM>(do_s + st * Cfg::kQBytes, do_slice, 2 * bp.dout_stride_s, m * BM, in.len_q);
    // lse_log2 and D: 16 chunks of 16 bytes each (the workspace holds all BM rows of a q-block).
    if (threadIdx.x < 2 * BM / 4) {
      const int c = threadIdx.x % (BM / 4);
      const float* src = (threadIdx.x < BM / 4 ? bp.lse_log2 : bp.dpsum) + in.ws_row(bp, h, m) + 4 * c;
      cp_async16(smem_u32(smem_raw + stats_at) + st * 2 * Cfg::kStatBytes + threadIdx.x * 16, src, true);
    }
  };
  if (steps > 0) {
    load_rows<Cfg, BN>(k_s, k_slice, 2 * p.k.stride_s, n0, seq.len_k);
    load_rows<Cfg, BN>(v_s, v_slice, 2 * p.v.stride_s, n0, seq.len_k);
    load_step(info, info.head_block[0].x, info.head_block[0].y, 0);
  }
  cp_async_commit();

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int j = 0; j < D / 2; ++j) dk[j] = dv[j] = 0.f;
  // The rows each of the thread's two keys keeps (row_hi 0 past len_k): the partial q-blocks' mask.
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    row_lo[hh] = mask.row_lo(n0 + kw + g + 8 * hh);
    row_hi[hh] = mask.row_hi(n0 + kw + g + 8 * hh);
  }

  // The loop's bound is read from smem (volatile: a fresh load) at each step's end (held in a register
  // across the step it spilled), and the step's (head, q-block) from its slot.
  const volatile int& steps_s = info_s.steps;
  if (steps > 0) for (int s = 0;; ++s) {
    cp_async_wait<0>();  // step s (and K, V) landed for this thread's copies
    __syncthreads();     // ... and everyone's; every warp is done with step s - 1 (its stage, dS^T)
    const Sm80BwdStepInfo& in = info_s;
    const int2 hm = in.head_block[s % 2];
    const int h = hm.x, m = hm.y, st = s % S;
    if (s + 1 < in.steps) {
      const bool head_done = m + 1 == in.q_blocks.end;
      const int h1 = head_done ? h + 1 : h, m1 = head_done ? in.q_blocks.begin : m + 1;
      load_step(in, h1, m1, s + 1);
      if (threadIdx.x == 0) info_s.head_block[(s + 1) % 2] = make_int2(h1, m1);
    }
    cp_async_commit();
    const uint32_t qb = q_s + st * Cfg::kQBytes, dob = do_s + st * Cfg::kQBytes;
    const float* lse = stats + st * 2 * BM;
    const float* dsum = lse + BM;
    // The lane made opaque once per step: the ldmatrix addresses derived from it are then computed in
    // the step, not hoisted out of the loop (held across it, they spilled at both head dims).
    const int ln = opaque_lane(lane);

    float sp[BM / 2];  // S^T, then P^T
#pragma unroll
    for (int j = 0; j < BM / 2; ++j) sp[j] = 0.f;
    mma_abt<T, Cfg, BM>(sp, k_s, kw, qb, ln);
    const bool full = in.q_blocks.full(m);
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 8 * nt + 2 * t + e, row = m * BM + r;
          float x = sp[4 * nt + 2 * hh + e];
          if (!full && (row < row_lo[hh] || row >= row_hi[hh])) x = -INFINITY;
          sp[4 * nt + 2 * hh + e] = cuda_backend::fast_exp2(fmaf(x, a.scale_log2, -lse[r]));
        }
    // P^T rounded to T once: dV's A operand, and the P of dS = P (dP - D) (FA3's rule's baseline rounds
    // P so too); 16 registers instead of 32 through dP and dS.
    uint32_t pp[BM / 4];
#pragma unroll
    for (int j = 0; j < BM / 4; ++j) pp[j] = cuda_backend::pack2<T>(sp[2 * j], sp[2 * j + 1]);
    // dV, dP^T, dS^T and dK per 16 q rows (one k16 A fragment of dV's and dK's mma), so that only 8
    // floats of dP^T live at a time beside P^T, dK and dV, and P^T's pairs die 4 at a time (all of
    // dP^T at once spilled at d 128); V's A fragments are read again for each 16 rows.
#pragma unroll
    for (int np = 0; np < BM / 16; ++np) {
      mma_frag_b<T, Cfg>(dv, &pp[4 * np], dob + np * 16 * Cfg::kRowBytes, ln);  // dV += P^T dO
      float ds[8];  // dP^T, then dS^T, of q rows 16 np .. 16 np + 15: sp[8 np + i]'s elements
#pragma unroll
      for (int i = 0; i < 8; ++i) ds[i] = 0.f;
      mma_abt<T, Cfg, 16>(ds, v_s, kw, dob + np * 16 * Cfg::kRowBytes, ln);  // dP^T
      uint32_t dsp[4];  // dS^T packed: dK's A operand and the smem tile's pairs
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        const float2 pv = unpack2<T>(pp[4 * np + i / 2]);
        const float* dd = &dsum[16 * np + 8 * (i >> 2) + 2 * t];
        dsp[i / 2] = cuda_backend::pack2<T>(pv.x * (ds[i] - dd[0]), pv.y * (ds[i + 1] - dd[1]));
      }
      mma_frag_b<T, Cfg>(dk, dsp, qb + np * 16 * Cfg::kRowBytes, ln);
      // dS^T to smem ([key][q row], chunk c of key row r at r * 128 + ((c ^ r % 8) << 4)): a warp's
      // 32 stores of a (chunk, hh) fall in 32 different banks.
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        const int r = kw + g + 8 * ((i >> 1) & 1), c = 2 * np + (i >> 2);
        const uint32_t at = ds_s + r * Sm80DsTile::kRowBytes + ((c ^ (r & 7)) << 4) + 4 * t;
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(dsp[i / 2]));
      }
    }
    __syncthreads();  // dS^T whole
    dq_add<T, Cfg>(bp.dq_accum + in.ws_row(bp, h, m) * D, ds_s, k_s, warp, ln);
    if (s + 1 >= steps_s) break;
  }
  cp_async_wait<0>();  // no copy may land after the CTA exits

  // dK = scale dS^T Q (the scale left out of dS), dV; keys past len_k (up to rows_k) get 0. The
  // sequence's offsets read again (not held across the loop).
  const cuda_backend::SeqInfo sq(a, b);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = n0 + kw + g + 8 * hh;
    if (key >= sq.rows_k) continue;
    T* dk_row = static_cast<T*>(bp.dk) + int64_t(sq.batch_coord) * bp.dk_stride_b + int64_t(sq.k_offset + key) * bp.dk_stride_s +
                int64_t(kv_head) * bp.dk_stride_h;
    T* dv_row = static_cast<T*>(bp.dv) + int64_t(sq.batch_coord) * bp.dv_stride_b + int64_t(sq.k_offset + key) * bp.dv_stride_s +
                int64_t(kv_head) * bp.dv_stride_h;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dk_row + 8 * j + 2 * t) =
          cuda_backend::pack2<T>(bp.scale * dk[4 * j + 2 * hh], bp.scale * dk[4 * j + 2 * hh + 1]);
      *reinterpret_cast<uint32_t*>(dv_row + 8 * j + 2 * t) =
          cuda_backend::pack2<T>(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
    }
  }
}

}  // namespace fastattn::sm80
