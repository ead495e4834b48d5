// The work of one CTA of the Hopper backward: its key block, the q-blocks the mask keeps, and in
// deterministic mode its turn among the key blocks adding into a q-block.
#pragma once

#include "cuda/common/bwd_seq.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"

namespace fastattn::sm90 {

using cuda_backend::BwdParams;

// What one CTA works on: its key block (of BwdConfig::kBlockN keys), and the q-blocks (per q head) that the block sees.
struct BwdTile {
  cuda_backend::BwdSeq seq;
  cuda_backend::WindowMask mask;
  int n_block, batch, kv_head, n0;
  // The q-blocks seen (the same for every q head of the group), walked upwards (from begin: dQ
  // adds of a q-block then come in key-block order), and those kept whole (no mask).
  cuda_backend::BlockRange q_blocks;
  __device__ __forceinline__ int steps(int q_per_kv) const { return q_blocks.empty() ? 0 : q_per_kv * q_blocks.count(); }
};

template <int kBlockN>
__device__ __forceinline__ BwdTile make_bwd_tile(const BwdParams& p, int item) {
  BwdTile t;
  int rest;
  if (p.det_chunk > 0) {  // BwdParams::det_chunk; a partial last chunk's extra blocks exit at once
    const int per_chunk = p.det_chunk * p.attn.batch * p.attn.heads_kv;
    rest = item % per_chunk / p.det_chunk;
    t.n_block = item / per_chunk * p.det_chunk + item % p.det_chunk;
  } else {
    t.n_block = item % p.n_blocks;
    rest = item / p.n_blocks;
  }
  t.kv_head = rest % p.attn.heads_kv;
  t.batch = rest / p.attn.heads_kv;
  t.seq = cuda_backend::BwdSeq(p, t.batch);
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.n0 = t.n_block * kBlockN;
  t.q_blocks = cuda_backend::query_blocks(t.mask, t.n0, t.n0 + kBlockN, 64);
  return t;
}

// Deterministic mode: how many key blocks before this one add into q-block m. The blocks that see m
// are contiguous (both ends of query_blocks rise with the key block): the first is found by bisection.
template <int kBlockN>
__device__ __forceinline__ int dq_rank(const BwdTile& t, int m) {
  int lo = 0, hi = t.n_block;  // the first key block whose range ends past m lies in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cuda_backend::query_blocks(t.mask, mid * kBlockN, mid * kBlockN + kBlockN, 64).end > m) hi = mid;
    else lo = mid + 1;
  }
  return t.n_block - lo;
}

}  // namespace fastattn::sm90
