// The work of one CTA of the Hopper backward: its key block, the q-blocks the mask keeps, and in
// deterministic mode its turn among the key blocks adding into a q-block.
#pragma once

#include <type_traits>

#include "cuda/common/bwd_seq.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/bit_lists.h"
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/lpt_order.h"
#include "cuda/sm90/bwd/wave_tail.h"

namespace fastattn::sm90 {

using cuda_backend::BwdParams;

// What one CTA works on: its key block (of BwdConfig::kBlockN keys), and the q-blocks (per q head) that the block sees.
// Blocks: the column view's source (mask/block_source.cuh): BlockRange (the window's q-blocks; a step's
// position is its q-block) or, in a block-sparse kernel (BwdConfig::kBlockList), BlockList (positions into the
// key tile's list of kept q-blocks: q_block(m) maps a position to its q-block).
template <class Blocks>
struct BwdTileOf {
  cuda_backend::BwdSeq seq;
  cuda_backend::WindowMask mask;
  int n_block, batch, kv_head, n0;
  int walk;  // the order of the steps (first_step / next_step): BwdWalk (lpt_order.h)
  // The q-blocks seen (the same for every q head of the group), walked upwards from begin, and
  // those kept whole (no mask).
  Blocks q_blocks;
  // A list tile's steps are positions (q_block: the q-block at one). The window's tiles use the step as the
  // q-block directly, with no call between: an inlined identity here changed ptxas's schedule of the
  // dense kernels (NVVM inlines in another order), which must stay as they were.
  static constexpr bool kList = !std::is_same_v<Blocks, cuda_backend::BlockRange>;
  __device__ __forceinline__ int q_block(int m) const { return q_blocks.block(m); }
  __device__ __forceinline__ int steps(int q_per_kv) const { return q_blocks.empty() ? 0 : q_per_kv * q_blocks.count(); }
  // Workspace row of q-block m (of kBlockM rows) of q head h: its lse / D there, and times d its dQ
  // accumulator run.
  template <int kBlockM>
  __device__ __forceinline__ int64_t ws_row(const BwdParams& p, int h, int m) const {
    if constexpr (kList)
      return int64_t(h) * p.padded_rows + seq.padded_q + q_block(m) * kBlockM;
    else
      return int64_t(h) * p.padded_rows + seq.padded_q + m * kBlockM;
  }
  // Deterministic mode: the semaphore of step m's q-block of q head h (the key blocks that added into it).
  __device__ __forceinline__ int* dq_sem(const BwdParams& p, int h, int m) const {
    if constexpr (kList)
      return p.dq_sem + (int64_t(batch) * p.attn.heads_q + h) * p.m_blocks + q_block(m);
    else
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

using BwdTile = BwdTileOf<cuda_backend::BlockRange>;
using BwdListTile = BwdTileOf<cuda_backend::BlockList>;
using BwdBitTile = BwdTileOf<cuda_backend::BitList>;
// A config's tile: the block-sparse kernels' (kBlockList) walk lists, the bitmask kernels' (kBitmask) their
// tiles' own lists with the needs-bits flag and the mask line.
template <class Cfg>
using BwdTileFor =
    std::conditional_t<Cfg::kBitmask, BwdBitTile, std::conditional_t<Cfg::kBlockList, BwdListTile, BwdTile>>;

// The window mask of a sequence's keys (the column view's rows, query_blocks).
__device__ __forceinline__ cuda_backend::WindowMask bwd_seq_mask(const BwdParams& p, const cuda_backend::BwdSeq& seq) {
  return cuda_backend::WindowMask{seq.len_k, seq.len_k - seq.len_q, p.attn.window_left, p.attn.window_right};
}

// The block-sparse backward's header of key tile n_block of (batch, KV head): BwdParams::q_list_headers
// (sm90/bwd/block_lists.h), one int4 per key tile in block-index order.
__device__ __forceinline__ int64_t bwd_list_header_index(const BwdParams& p, int batch, int kv_head, int n_block) {
  return (int64_t(batch) * p.attn.heads_kv + kv_head) * p.n_blocks + n_block;
}

// The tile's mask and the q-blocks its key block sees, once seq and n_block are set (a list tile: its
// header, which the list builder made from the same range).
template <int kBlockN, int kBlockM, class Tile>
__device__ __forceinline__ void set_bwd_tile_block(const BwdParams& p, Tile& t, int n_block) {
  t.n_block = n_block;
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.n0 = n_block * kBlockN;
  if constexpr (std::is_same_v<Tile, BwdListTile>) {
    int4 h = make_int4(0, 0, 0, 0);
    if (n_block < p.n_blocks) h = __ldg(reinterpret_cast<const int4*>(p.q_list_headers) + bwd_list_header_index(p, t.batch, t.kv_head, n_block));
    t.q_blocks.begin = h.x;
    t.q_blocks.end = h.y;
    t.q_blocks.full_begin = h.z;
    t.q_blocks.full_end = h.w;
    t.q_blocks.list = p.q_lists;
  } else if constexpr (std::is_same_v<Tile, BwdBitTile>) {
    // The bitmask prep's header and the tile's mask line (bwd/bit_lists.h: the lines after the headers).
    int4 h = make_int4(0, 0, 0, 0);
    int line = 0;
    if (n_block < p.n_blocks) {
      const int64_t at = bwd_list_header_index(p, t.batch, t.kv_head, n_block);
      h = __ldg(reinterpret_cast<const int4*>(p.q_list_headers) + at);
      line = __ldg(bwd_bit_tile_lines(p.q_list_headers, int64_t(p.attn.batch) * p.attn.heads_kv * p.n_blocks) + at);
    }
    t.q_blocks.begin = h.x;
    t.q_blocks.end = h.y;
    t.q_blocks.full_begin = h.z;
    t.q_blocks.full_end = h.w;
    t.q_blocks.list = p.q_lists;
    t.q_blocks.line = line;
  } else {
    t.q_blocks = bwd_key_block_q_blocks(t.mask, n_block, kBlockN, kBlockM);
  }
}

template <int kBlockN, int kBlockM, class Tile = BwdTile>
__device__ __forceinline__ Tile make_bwd_tile(const BwdParams& p, int item) {
  Tile t;
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

// The tile of grid item `item` in a kernel that cuts the full mask's wave tail (wave_tail.h): the tail's
// items are pieces, each a share of its tile's q-blocks.
template <int kBlockN, int kBlockM, class Tile = BwdTile>
__device__ __forceinline__ Tile make_bwd_tail_tile(const BwdParams& p, int item) {
  int tile_item, slot, piece;
  bwd_tail_item(item, p.tail_from, p.tail_pieces, tile_item, slot, piece);
  Tile t = make_bwd_tile<kBlockN, kBlockM, Tile>(p, tile_item);
  if (slot >= 0) bwd_tail_share(piece, p.tail_pieces, t.q_blocks.begin, t.q_blocks.end);
  return t;
}

// Paired key blocks (BwdParams::kv_pair): item = unit x ceil(n_blocks / 2) + j. The CTA's first tile
// (key block j, walked downwards) and the count of its tiles (bwd_pair_blocks over the sequence's own
// key blocks, so that a pair never reaches past rows_k).
template <int kBlockN, int kBlockM, class Tile = BwdTile>
__device__ __forceinline__ Tile make_bwd_pair_tile(const BwdParams& p, int item, int& tiles) {
  Tile t;
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
template <int kBlockN, int kBlockM, class Tile>
__device__ __forceinline__ Tile bwd_pair_second(const BwdParams& p, Tile t) {
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

// Deterministic mode: the value of step m's q-block semaphore at this key tile's turn, i.e. how many key
// tiles add into the q-block before it. The window's tile: the key blocks above it that see the q-block
// (dq_last_block). A bitmask list tile: the key tiles above it whose lists hold the q-block, counted by the
// prep (bwd/bit_lists.h bwd_bit_dq_turn); they start earlier in the deterministic CTA order as the key
// blocks above do, and each waits only on tiles above it, so the chain of turns ends at the top one.
template <int kBlockN, int kBlockM, class Tile>
__device__ __forceinline__ int dq_turn(const BwdParams& p, const Tile& t, int m) {
  if constexpr (Tile::kList) {  // m is the step's list position
    return __ldg(bwd_bit_dq_turn(p.q_lists, m, p.m_blocks));
  } else {
    return dq_last_block<kBlockN, kBlockM>(t, m) - t.n_block;
  }
}

}  // namespace fastattn::sm90
