// The work of one CTA of the Hopper backward: its key block, the q-blocks the mask keeps, and in
// deterministic mode its turn among the key blocks adding into a q-block.
#pragma once

#include "cuda/common/bwd_seq.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/lpt_order.h"

namespace fastattn::sm90 {

using cuda_backend::BwdParams;

// What one CTA works on: its key block (of BwdConfig::kBlockN keys), and the q-blocks (per q head) that the block sees.
struct BwdTile {
  cuda_backend::BwdSeq seq;
  cuda_backend::WindowMask mask;
  int n_block, batch, kv_head, n0;
  int walk;  // the order of the steps (first_step / next_step): BwdWalk (lpt_order.h)
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
  // The dQ ring's position of q-block m of q head h (dq_ring.h; below 2^31 by the host's rule).
  __device__ __forceinline__ int ring_position(const BwdParams& p, int h, int m) const {
    return (int)bwd_ring_position(batch, h, m, p.attn.heads_kv, p.attn.q_per_kv, p.m_blocks, p.ring_section);
  }
  // The CTA's walk over its steps (q head h, q-block m), the same in the producer, the consumers and
  // the dQ writers (lpt_order.h).
  __device__ __forceinline__ void first_step(const BwdParams& p, int& h, int& m) const {
    bwd_walk_first(walk, kv_head * p.attn.q_per_kv, q_blocks.begin, q_blocks.end, h, m);
  }
  __device__ __forceinline__ void next_step(const BwdParams& p, int& h, int& m) const {
    bwd_walk_next(walk, kv_head * p.attn.q_per_kv, p.attn.q_per_kv, q_blocks.begin, q_blocks.end, h, m);
  }
};

// The tile's mask and the q-blocks its key block sees, once seq and n_block are set.
template <int kBlockN, int kBlockM>
__device__ __forceinline__ void set_bwd_tile_block(const BwdParams& p, BwdTile& t, int n_block) {
  t.n_block = n_block;
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.n0 = n_block * kBlockN;
  t.q_blocks = bwd_key_block_q_blocks(t.mask, n_block, kBlockN, kBlockM);
}

template <int kBlockN, int kBlockM>
__device__ __forceinline__ BwdTile make_bwd_tile(const BwdParams& p, int item) {
  BwdTile t;
  int rest, n_block;
  if (p.det_chunk > 0) {
    // Deterministic: chunks of det_chunk key blocks per (sequence, KV head), all heads' chunk before
    // the next, from the last key block down (dq_last_block: higher key blocks add first). Slots past the
    // blocks (the top chunk's padding up to a multiple of det_chunk) exit at once.
    const int per_chunk = p.det_chunk * p.attn.batch * p.attn.heads_kv;
    const int n_slots = (p.n_blocks + p.det_chunk - 1) / p.det_chunk * p.det_chunk;
    rest = item % per_chunk / p.det_chunk;
    n_block = n_slots - 1 - (item / per_chunk * p.det_chunk + item % p.det_chunk);
  } else {
    n_block = item % p.n_blocks;
    rest = item / p.n_blocks;
  }
  t.kv_head = rest % p.attn.heads_kv;
  t.batch = rest / p.attn.heads_kv;
  t.seq = cuda_backend::BwdSeq(p, t.batch, kBlockM);
  set_bwd_tile_block<kBlockN, kBlockM>(p, t, n_block);
  return t;
}

// Paired key blocks (BwdParams::kv_pair): item = unit x ceil(n_blocks / 2) + j. The CTA's first tile
// (key block j, walked downwards) and the count of its tiles (bwd_pair_blocks over the sequence's own
// key blocks, so that a pair never reaches past rows_k).
template <int kBlockN, int kBlockM>
__device__ __forceinline__ BwdTile make_bwd_pair_tile(const BwdParams& p, int item, int& tiles) {
  BwdTile t;
  const int n_pairs = (p.n_blocks + 1) / 2, j = item % n_pairs, rest = item / n_pairs;
  t.kv_head = rest % p.attn.heads_kv;
  t.batch = rest / p.attn.heads_kv;
  t.seq = cuda_backend::BwdSeq(p, t.batch, kBlockM);
  int first, second;
  tiles = bwd_pair_blocks(j, (t.seq.rows_k + kBlockN - 1) / kBlockN, first, second);
  set_bwd_tile_block<kBlockN, kBlockM>(p, t, first);
  t.walk = kBwdWalkDown;
  return t;
}
// The pair's second tile, from the first (key block N - 1 - j, walked upwards with the heads inner).
template <int kBlockN, int kBlockM>
__device__ __forceinline__ BwdTile bwd_pair_second(const BwdParams& p, BwdTile t) {
  set_bwd_tile_block<kBlockN, kBlockM>(p, t, (t.seq.rows_k + kBlockN - 1) / kBlockN - 1 - t.n_block);
  t.walk = kBwdWalkUpInner;
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
