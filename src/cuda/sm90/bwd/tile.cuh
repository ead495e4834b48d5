// The work of one CTA of the Hopper backward: its key block, the q-blocks the mask keeps, and in
// deterministic mode its turn among the key blocks adding into a q-block.
#pragma once

#include "cuda/common/bwd_seq.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/lpt_order.h"

namespace fastattn::sm90 {

using cuda_backend::BwdParams;

// What one CTA works on: its key block (of BwdConfig::kBlockN keys), and the q-blocks (per q head) that the block sees.
struct BwdTile {
  cuda_backend::BwdSeq seq;
  cuda_backend::WindowMask mask;
  int n_block, batch, kv_head, n0;
  // The q-blocks seen (the same for every q head of the group), walked upwards from begin, and
  // those kept whole (no mask).
  cuda_backend::BlockRange q_blocks;
  __device__ __forceinline__ int steps(int q_per_kv) const { return q_blocks.empty() ? 0 : q_per_kv * q_blocks.count(); }
  // Workspace row of q-block m (of kBlockM rows) of q head h: its lse / D there, and times d its dQ
  // accumulator run.
  template <int kBlockM>
  __device__ __forceinline__ int64_t ws_row(const BwdParams& p, int h, int m) const {
    return int64_t(h) * p.padded_rows + seq.padded_q + m * kBlockM;
  }
  // Deterministic mode: the semaphore of q-block m of q head h (the key blocks that added into it).
  __device__ __forceinline__ int* dq_sem(const BwdParams& p, int h, int m) const {
    return p.dq_sem + (int64_t(batch) * p.attn.heads_q + h) * p.m_blocks + m;
  }
  // The dQ writers' flat walk over the steps: q-blocks upwards, then the group's next q head.
  __device__ __forceinline__ void next_q_block(int& h, int& m) const {
    if (++m == q_blocks.end) {
      m = q_blocks.begin;
      ++h;
    }
  }
};

// Default mode under a causal mask (folded into window_right 0) or any window with a right edge
// (lpt_order.h): the section of (sequence, KV head) units whose Q,
// dO and fp32 dQ accumulator fit in 40 MB of L2 together, a power of two (so that it divides the
// usual head counts: a short last section brings the tail back), and the CTA's block-index item.
inline constexpr float kBwdLptL2Bytes = 40.f * (1 << 20);
template <int kHeadDim>
__device__ __forceinline__ int lpt_item(const BwdParams& p, int item) {
  const int units = p.attn.heads_kv * p.attn.batch;
  const float unit_bytes = float(p.attn.q_per_kv) * float(max(p.attn.seqlen_q, 1)) * (8 * kHeadDim);  // Q, dO 16-bit; dQ fp32
  const int fit = int(fminf(__fdividef(kBwdLptL2Bytes, unit_bytes), float(units)));  // a heuristic: approximate
  return bwd_lpt_item(item, units, p.n_blocks, fit > 1 ? 1 << (31 - __clz(fit)) : 1);
}

template <int kBlockN, int kBlockM>
__device__ __forceinline__ BwdTile make_bwd_tile(const BwdParams& p, int item) {
  BwdTile t;
  int rest;
  if (p.det_chunk > 0) {
    // Deterministic: chunks of det_chunk key blocks per (sequence, KV head), all heads' chunk before
    // the next, from the last key block down (dq_last_block: higher key blocks add first). Slots past the
    // blocks (the top chunk's padding up to a multiple of det_chunk) exit at once.
    const int per_chunk = p.det_chunk * p.attn.batch * p.attn.heads_kv;
    const int n_slots = (p.n_blocks + p.det_chunk - 1) / p.det_chunk * p.det_chunk;
    rest = item % per_chunk / p.det_chunk;
    t.n_block = n_slots - 1 - (item / per_chunk * p.det_chunk + item % p.det_chunk);
  } else {
    t.n_block = item % p.n_blocks;
    rest = item / p.n_blocks;
  }
  t.kv_head = rest % p.attn.heads_kv;
  t.batch = rest / p.attn.heads_kv;
  t.seq = cuda_backend::BwdSeq(p, t.batch, kBlockM);
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.n0 = t.n_block * kBlockN;
  t.q_blocks = cuda_backend::query_blocks(t.mask, t.n0, t.n0 + kBlockN, kBlockM);
  return t;
}

// Deterministic mode: the order of the key blocks adding into a q-block is from the last key block
// down. A key block's walk starts at its first q-block (both ends of query_blocks rise with the
// key block), so under a causal or window mask the block above reaches a q-block steps earlier in
// its walk than this one does, and the chain of turns has slack; dense, both orders are alike.
// The blocks that add into q-block m before this one (m within this block's range) are those above
// it up to the last present one that q-block m sees: key j's rows start at row_lo(j) = j - diag -
// right (window_mask.cuh), so block n' sees m while kBlockN n' - diag - right < kBlockM (m + 1) (the
// numerator is >= kBlockN n_block >= 0 since this block sees m). Their CTAs start earlier
// (make_bwd_tile's order), so a CTA never waits on one that may not be resident yet.
template <int kBlockN, int kBlockM>
__device__ __forceinline__ int dq_last_block(const BwdTile& t, int m) {
  const int top = (t.mask.len_k - 1) / kBlockN;  // the last key block with a present key
  if (t.mask.right < 0) return top;
  return min(top, (kBlockM * m + kBlockM - 1 + t.mask.diag + t.mask.right) / kBlockN);
}

}  // namespace fastattn::sm90
