// The Hopper split-D forward's tile (docs/notes/splitd-sm90.md): the kernel's parameters and which
// rows, slice pair and key blocks a CTA covers, derived alike by the producer and the consumers from
// the block index.
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <type_traits>

#include "cuda/common/attn_params.h"
#include "cuda/common/math.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/seqlen.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/keep_bits.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/fwd_splitd/config.h"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

struct SplitDParams {
  cuda_backend::AttnParams attn;
  int qk_atoms;  // d_qk / 64
  int v_atoms;   // d_v / 64
  int pairs;     // slice pairs: ceil(v_atoms / kPairAtoms)
  int m_blocks;  // 64-row blocks of the longest query sequence
  // The ring: ring_slots chunks from chunk ring0 of SplitDSmem::chunks (Q's atoms are chunks
  // [0, qk_atoms)): ring0 = qk_atoms, ring_slots = kChunks - qk_atoms (launch.cuh).
  int ring0;
  int ring_slots;
  // GQA packing (sched/gqa_pack.h at 64-row tiles; decode): tile row t is q head head + (t >>
  // row_head_shift) at query position m0 + (t & row_pos_mask), pack_heads q heads of one KV head a
  // tile, pack_groups tiles per KV head (blockIdx.y = kv_head * pack_groups + group). Unpacked:
  // row_pos_mask 63, row_head_shift 6, pack_heads 1, pack_groups 0 (blockIdx.y = q head).
  int row_pos_mask;
  int row_head_shift;
  int pack_heads;
  int pack_groups;
  // Split-KV: each tile's key blocks in `splits` shares (blockIdx.x = (m-block x pairs + pair) x splits
  // + split); with splits > 1 the tile stores fp32 partials (split_plan.h's layout: split s's row
  // (b, h, i) at s * part_rows + (b * heads_q + h) * part_rows_per_head + q_offset + i) for the
  // combine kernel instead of out.
  int splits;
  float* o_part;
  float* lse_part;
  int64_t part_rows;
  int64_t part_rows_per_head;
};

// (stage, phase) of the ring, whose slot count is a kernel parameter: stage in the low byte,
// phase in bit 8 (PipeState's encoding; one compare against the count, no division).
struct SplitDRingState {
  uint32_t bits = 0;
  __device__ __forceinline__ int stage() const { return int(bits & 0xffu); }
  __device__ __forceinline__ uint32_t phase() const { return bits >> 8; }
  __device__ __forceinline__ void advance(int slots) {
    bits = int(bits & 0xffu) == slots - 1 ? (bits & 0x100u) ^ 0x100u : bits + 1;
  }
};

// The CTA's tile: its sequence, rows [m0, m0 + 64), slice pair and key blocks (last first, as the
// main forward walks them). Producer and consumers derive it alike from the block index.
struct SplitDTile {
  cuda_backend::SeqInfo seq;
  cuda_backend::WindowMask mask;
  int head, kv_head, m0, pair;
  int heads;  // q heads in the tile (GQA packing; 1 unpacked)
  int split;  // which share of the key blocks
  cuda_backend::BlockRange blocks;
};

__device__ __forceinline__ SplitDTile splitd_tile(const SplitDParams& p) {
  using Cfg = SplitDConfig;
  SplitDTile t;
  const int x = int(blockIdx.x) / p.splits;
  t.split = int(blockIdx.x) - x * p.splits;
  t.pair = x % p.pairs;
  // The longest rows first (causal: the last m-blocks see the most keys), so that the grid's tail
  // holds the short ones.
  const int m_block = p.m_blocks - 1 - x / p.pairs;
  if (p.pack_groups > 0) {
    t.kv_head = int(blockIdx.y) / p.pack_groups;
    const int first = (int(blockIdx.y) - t.kv_head * p.pack_groups) * p.pack_heads;
    t.head = t.kv_head * p.attn.q_per_kv + first;
    t.heads = min(p.pack_heads, p.attn.q_per_kv - first);
  } else {
    t.head = int(blockIdx.y);
    t.kv_head = t.head / p.attn.q_per_kv;
    t.heads = 1;
  }
  t.seq = cuda_backend::SeqInfo(p.attn, int(blockIdx.z));
  t.mask = cuda_backend::WindowMask{t.seq.len_k, t.seq.len_k - t.seq.len_q, p.attn.window_left, p.attn.window_right};
  t.m0 = m_block * Cfg::kRows;  // packed: one m-block (s_q <= 32), m0 = 0
  const int m1 = min(t.m0 + p.row_pos_mask + 1, t.seq.len_q);
  t.blocks = cuda_backend::BlockRange{0, 0, 0, 0};
  if (t.m0 < m1) t.blocks = cuda_backend::key_blocks(t.mask, t.m0, m1, Cfg::kKeys);
  t.blocks = cuda_backend::split_share(t.blocks, t.split, p.splits);
  return t;
}

}  // namespace fastattn::sm90
