// The additive bias in the Hopper backward's step (BiasBwdConfig, kernel.cuh): the bias of this thread's
// S^T elements in the accumulator's order (16-bit bias: copied a step ahead into the warp's rows of the next
// step's dS^T buffer and read by ldmatrix.trans, bwd_bias_stage; else, and at the edges, loaded from global
// memory), and dbias = dS^T added back from the registers that hold it (docs/notes/bwd-sm90.md, sessions 38 and
// 40). The bias seeds S^T's accumulator (st = bias / scale, then S^T += K Q^T), so that no register holds it
// beside the MMA's accumulators.
// S^T accumulator element i = 4 j + 2 hh + e (j = 2 kk + r / 2, hh = r % 2; kernel.cuh's 8 kk + 2 r + e)
// is key row + 8 hh, q column 8 j + 2 quad_col + e.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/bwd_params.h"
#include "cuda/common/math.cuh"
#include "cuda/sm90/prim/ldmatrix.cuh"

namespace fastattn::sm90 {

// A bias shared by the batch (BwdBias::batch_inner) in block-index order (the sections': lpt_order.h): the
// CTAs of one (KV head, key block) of every batch entry run next to each other, so that their reads of the
// same bias tile and their dbias adds into the same entries meet in L2 (in make_bwd_tile's order the batch is
// the outermost dim, and the four adds of b4 landed a quarter of the run apart: notes, "Bias backward").
// Launch position x is (batch innermost, then key block, then KV head); returned: make_bwd_tile's item of the
// same work.
__device__ __forceinline__ int bwd_bias_batch_inner_item(int x, int batch, int n_blocks, int heads_kv) {
  const int b = x % batch, rest = x / batch, n_block = rest % n_blocks, kv_head = rest / n_blocks;
  return n_block + n_blocks * (kv_head + heads_kv * b);
}

using cuda_backend::unpack2;  // a packed pair of T (pack2's order: low half first) as two floats

// Where one thread's bias elements of a step start, and which of them exist: q rows past len_q and keys
// past len_k read 0 (their P is 0 by the lse / mask anyway) and add no dbias.
struct BwdBiasSpot {
  int64_t at;     // element offset of (q row q0, key row key) in the bias, or in dbias (grad_at)
  int64_t grad_at;
  int rows_left;  // q rows of this thread's columns that exist: column 8 j + e exists while 8 j + e < rows_left
  int key, len_k;  // this thread's first key (the second is key + 8); keys from len_k on do not exist
};

__device__ __forceinline__ BwdBiasSpot bwd_bias_spot(const cuda_backend::BwdParams& p, int batch, int h, int q0, int key,
                                                     int len_q, int len_k) {
  const cuda_backend::BwdBias& b = p.bias;
  const int hb = h / b.head_div;
  BwdBiasSpot s;
  s.at = batch * b.stride_b + hb * b.stride_h + q0 * b.stride_r + key;
  s.grad_at = batch * b.grad_stride_b + hb * b.grad_stride_h + q0 * b.grad_stride_r + key;
  s.rows_left = len_q - q0;
  s.key = key;
  s.len_k = len_k;
  return s;
}

// The step's bias lines into L1 a step ahead (prefetch.global.L1: no register holds them; the load at the seed
// then hits L1, or L2 where L1, 28 KB beside the 227 KB of smem, has let them go): this thread's 16 rows
// (8 j + e) at its two keys (+ 8 hh). Words held in registers from here to the seed spilled (notes).
template <int kN, bool kF32>
__device__ __forceinline__ void bwd_bias_prefetch(const cuda_backend::BwdParams& p, const BwdBiasSpot& s) {
  const char* base = static_cast<const char*>(p.bias.data) + s.at * (kF32 ? 4 : 2);
  const int64_t row_bytes = p.bias.stride_r * (kF32 ? 4 : 2);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (8 * j + e < s.rows_left && s.key < s.len_k)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(base + (8 * j + e) * row_bytes));
}

// ALiBi (BiasBwdConfig's kAlibi kernel, BwdBias::kind kBiasAlibi): element (q column 8 j + e, key + 8 hh) gets
// -slope |dist| / scale, dist = q + len_k - len_q - key = dist0 + 8 j + e - 8 hh with dist0 = len_k - rows_left - key,
// exact in fp32; past the sequence finite values whose P is 0 anyway. (One FFMA a term where every dist has one
// sign measured 4-5 % slower than this FADD + FMUL |.|: notes.)
template <int kN>
__device__ __forceinline__ void bwd_alibi_seed(float (&st)[kN / 2], const cuda_backend::BwdParams& p,
                                               const BwdBiasSpot& s) {
  const float neg = -__ldg(static_cast<const float*>(p.bias.data) + (s.at - s.key)) * p.bias.inv_scale;
  const float dist0 = float(s.len_k - s.rows_left - s.key);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) st[4 * j + 2 * hh + e] = neg * fabsf(dist0 + float(8 * j + e - 8 * hh));
}

// S^T's accumulator seeded with the bias over the softmax scale: after S^T += K Q^T and the step's usual
// scale log2e, the exponent is s scale log2e + bias log2e, the forward's (whose lse, in log2 units from the
// preprocess, includes the bias). -inf entries stay -inf. F32 bias (BiasBwdConfig's kF32 kernel): element by
// element. BF16 / F16: 32-bit words of two keys, lanes l and l ^ 4 holding keys k (even) and k + 1 of the same
// q columns: the even lane loads q row 8 j (keys k, k + 1), the odd lane row 8 j + 1, and one shuffle and one
// byte permute a word give each its own key's two rows (half the loads; where the bias's base is 4-byte aligned
// and its strides even: BwdBias::pairs, else element by element). A pair whose key k + 1 is past len_k reads k alone.
template <int kN>
__device__ __forceinline__ void bwd_bias_seed_f32(float (&st)[kN / 2], const cuda_backend::BwdParams& p,
                                                  const BwdBiasSpot& s) {
  const float inv_scale = p.bias.inv_scale;
  const float* base = static_cast<const float*>(p.bias.data) + s.at;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float* row = base + (8 * j + e) * p.bias.stride_r;
      const bool row_ok = 8 * j + e < s.rows_left;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        st[4 * j + 2 * hh + e] = row_ok && s.key + 8 * hh < s.len_k ? __ldg(row + 8 * hh) * inv_scale : 0.f;
    }
}
// staged: the words come from the warp's slot (bwd_bias_stage, issued ahead; implies BwdBias::pairs) by
// ldmatrix.trans, already in the accumulator's order (word 4 jj + mtx: q rows 8 j, + 1 at key + 8 hh, 2 j + hh =
// 4 jj + mtx), unpacked 4 at a time (all 16 words held, or the read in a function of its own, spilled in the fp16 unit).
template <int kN>
__device__ __forceinline__ void bwd_bias_seed16(float (&st)[kN / 2], const cuda_backend::BwdParams& p,
                                                const BwdBiasSpot& s, bool staged = false, uint32_t slot = 0) {
  const float inv_scale = p.bias.inv_scale;
  const bool bf16 = p.bias.kind == cuda_backend::kBiasBF16;
  if (!p.bias.pairs) {  // odd strides or a base off 4 bytes: element by element, as F32
    const unsigned short* base = static_cast<const unsigned short*>(p.bias.data) + s.at;
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const unsigned short* row = base + (8 * j + e) * p.bias.stride_r;
        const bool row_ok = 8 * j + e < s.rows_left;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const uint32_t v = row_ok && s.key + 8 * hh < s.len_k ? uint32_t(__ldg(row + 8 * hh)) : 0u;
          st[4 * j + 2 * hh + e] =
              (bf16 ? __uint_as_float(v << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(v)))) *
              inv_scale;
        }
      }
    return;
  }
  if (staged) {
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncwarp();  // every lane's copies landed and are visible to the warp
    const int lane = threadIdx.x % 32, mtx = lane / 8;
#pragma unroll
    for (int jj = 0; jj < kN / 16; ++jj) {
      const int r = 8 * (2 * jj + mtx / 2) + lane % 8, c = mtx % 2;  // block mtx: q rows 8 (2 jj + mtx / 2).., keys 8 c..
      uint32_t q[4];
      ldmatrix_x4_trans(slot + 32 * r + 16 * (c ^ ((r >> 2) & 1)), q);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 v = bf16 ? unpack2<__nv_bfloat16>(q[k]) : unpack2<__half>(q[k]);
        st[2 * (4 * jj + k)] = v.x * inv_scale;
        st[2 * (4 * jj + k) + 1] = v.y * inv_scale;
      }
    }
    return;
  }
  uint32_t w[kN / 4];
  const int odd = s.key & 1;
  const unsigned short* base = static_cast<const unsigned short*>(p.bias.data) + s.at + odd * (p.bias.stride_r - 1);
  // loaded: w[2 j + hh] is q row 8 j + odd, keys k + 8 hh, + 1 (k = s.key - odd), then exchanged into the same order
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const unsigned short* row = base + (8 * j) * p.bias.stride_r;
    const bool row_ok = 8 * j + odd < s.rows_left;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int k = s.key - odd + 8 * hh;
      uint32_t v = 0;
      if (row_ok && k + 1 < s.len_k)
        v = __ldg(reinterpret_cast<const unsigned int*>(row + 8 * hh));
      else if (row_ok && k < s.len_k)
        v = __ldg(row + 8 * hh);
      w[2 * j + hh] = v;
    }
  }
  const uint32_t sel = odd ? 0x3276u : 0x5410u;  // even lane: (own low, partner's low); odd: (partner's high, own high)
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    const uint32_t partner = __shfl_xor_sync(0xffffffffu, w[i], 4);
    w[i] = __byte_perm(w[i], partner, sel);  // q rows 8 j (low half), 8 j + 1 (high half)
  }
#pragma unroll
  for (int i = 0; i < kN / 4; ++i) {
    const float2 v = bf16 ? unpack2<__nv_bfloat16>(w[i]) : unpack2<__half>(w[i]);
    st[2 * i] = v.x * inv_scale;  // element 4 j + 2 hh + e with i = 2 j + hh
    st[2 * i + 1] = v.y * inv_scale;
  }
}

// The staged seed (BwdBias::lean & kBwdBiasStaged; BF16 / F16): each consumer warp copies its own 64 q rows x 16
// keys (2 KB) of the next step by cp.async (16 bytes a copy, L2 only) once dQ has left the registers, and reads
// them at the step's seed by ldmatrix.trans, whose 8 x 8 transposed blocks are the accumulator's order: word
// (q rows 8 j + 2 quad_col, + 1) at key row + 8 hh, no shuffle or permute, 4 instructions instead of 16 loads.
// The slot is the warp's own 16 rows of the next step's dS^T buffer (kernel.cuh, bias_slot): free from this step's
// dQ on (the last readers of that buffer, both warpgroups' dQ MMAs of the step before, are done before the
// warpgroups met after this step's dS^T), and written next by this warp's own dS^T of the next step, after the seed
// has read it. Slot layout: q row r at 32 r, keys 8 c.. (c = 0, 1) at 16 (c ^ (r / 4 % 2)): the 8 rows of an
// ldmatrix block fall on 8 different 16-byte bank groups. Only where the warp's 64 rows and 16 keys all exist
// (bwd_bias_warp_whole); the rest take bwd_bias_seed16's loads. The read is bwd_bias_seed16's `staged` branch.
template <int kN>
__device__ __forceinline__ bool bwd_bias_warp_whole(const BwdBiasSpot& s) {
  const int lane = threadIdx.x % 32;
  return s.rows_left + 2 * (lane % 4) >= kN && s.key - lane / 4 + 16 <= s.len_k;
}
template <int kN>
__device__ __forceinline__ void bwd_bias_stage(const cuda_backend::BwdParams& p, const BwdBiasSpot& s, uint32_t slot) {
  static_assert(kN == 64, "the slot is 16 rows of a 64-q-row dS^T atom");
  // kN rows x 2 chunks over 32 lanes: lane l takes chunk c = l % 2 of rows r = l / 2 + 16 i, whose swizzle bit
  // r / 4 % 2 does not depend on i: one shared address plus 512 i, one global pointer stepped by 16 rows.
  const int lane = threadIdx.x % 32, r = lane / 2, c = lane % 2;
  const int rs = int(p.bias.stride_r);
  const unsigned short* src = static_cast<const unsigned short*>(p.bias.data) +
                              (s.at - 2 * (lane % 4) * p.bias.stride_r - lane / 4) + (r * rs + 8 * c);
  const uint32_t dst = slot + 32 * r + 16 * (c ^ ((r >> 2) & 1));
#pragma unroll
  for (int i = 0; i < kN / 16; ++i)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 512 * i), "l"(src + 16 * i * rs) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// dbias += dS^T of the step, from the packed A fragments that dK += dS^T Q and dQ = dS K read (so dbias is
// dS as those MMAs see it, rounded to T, summed in fp32): fire-and-forget adds, so that entries shared by
// batch entries or q heads sum; an entry of a bias without broadcast dims gets exactly one add onto the
// host's zeros, which is the value itself. Fragment register dsf[kk][r] holds elements e = 0, 1 (low, high).
template <class T, int kN>
__device__ __forceinline__ void bwd_dbias_add(const cuda_backend::BwdParams& p, const BwdBiasSpot& s,
                                              const uint32_t (&dsf)[kN / 16][4]) {
  float* base = p.bias.grad + s.grad_at;
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int j = 2 * kk + r / 2, hh = r % 2;
      const float2 v = unpack2<T>(dsf[kk][r]);
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (8 * j + e < s.rows_left && s.key + 8 * hh < s.len_k)
          atomicAdd(base + (8 * j + e) * p.bias.grad_stride_r + 8 * hh, e ? v.y : v.x);
    }
}

// dbias by key pairs (BwdBias::lean & kBwdBiasGradPairs; the host sets it where dbias's base is 8-byte aligned and
// its strides even): the seed's exchange reversed. Lanes l and l ^ 4 hold keys k (even) and k + 1 of the same q
// rows 8 j, 8 j + 1 (a fragment word's low and high halves); one shuffle and one byte permute give the even lane
// row 8 j's (k, k + 1) and the odd lane row 8 j + 1's, contiguous fp32 in dbias: one 8-byte red.global.add.v2.f32
// each, 16 adds a step at kN 64 instead of 32 (the same sectors: each instruction's 32 lanes cover 8 full 32-byte
// sectors instead of 4). A thread whose rows and keys all exist adds unguarded at 32-bit offsets off one base
// (the host bounds 64 rows' span below 2^31 elements); at the tile's edges element by element, guarded.
template <class T, int kN>
__device__ __forceinline__ void bwd_dbias_add_pairs(const cuda_backend::BwdParams& p, const BwdBiasSpot& s,
                                                    const uint32_t (&dsf)[kN / 16][4]) {
  const int odd = s.key & 1;
  const uint32_t sel = odd ? 0x3276u : 0x5410u;  // even lane: (own low, partner's low); odd: (partner's high, own high)
  const int rs = int(p.bias.grad_stride_r);
  float* base = p.bias.grad + (s.grad_at - odd + odd * p.bias.grad_stride_r);  // (q row odd, key k)
  float2 v[kN / 4];  // v[2 j + hh]: q row 8 j + odd, keys k + 8 hh, + 1
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t partner = __shfl_xor_sync(0xffffffffu, dsf[kk][r], 4);
      v[4 * kk + r] = unpack2<T>(__byte_perm(dsf[kk][r], partner, sel));  // i = 2 j + hh = 4 kk + r
    }
  if (kN - 7 < s.rows_left && s.key - odd + 9 < s.len_k) {
#pragma unroll
    for (int j = 0; j < kN / 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
        asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(base + (8 * j * rs + 8 * hh)),
                     "f"(v[2 * j + hh].x), "f"(v[2 * j + hh].y)
                     : "memory");
    return;
  }
#pragma unroll
  for (int j = 0; j < kN / 8; ++j)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int k = s.key - odd + 8 * hh;
      float* at = base + (8 * j * rs + 8 * hh);
      if (8 * j + odd < s.rows_left) {
        if (k < s.len_k) atomicAdd(at, v[2 * j + hh].x);
        if (k + 1 < s.len_k) atomicAdd(at + 1, v[2 * j + hh].y);
      }
    }
}

}  // namespace fastattn::sm90
