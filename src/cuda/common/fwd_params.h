// Everything a forward kernel needs at run time (pointers, strides in elements, sizes, mask
// parameters). Plain data, shared by host launch code and all arches' kernels.
#pragma once

#include <cstdint>

#include "cuda/common/fast_div.h"

namespace fastattn::cuda_backend {

// The divisors of the tile order (sched/tile_order.cuh), set by the launch from the fields below
// (tile_divisors) once the tile space and the section width are final.
struct TileDivisors {
  FastDiv m_blocks, head_slots, heads_kv;
  FastDiv section_tiles, section_slots, last_section_slots;  // causal: a section's tiles and width
};

struct FwdParams {
  void* out = nullptr;
  int out_tma = 0;       // store O through smem with TMA (fixed-length, TMA-compatible out layout)
  int out_vec16 = 0;     // out's base and row strides are 16-byte aligned: 16-byte register stores
  float* lse = nullptr;  // may be null: not written
  int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;
  int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int q_per_kv = 1;     // GQA ratio h_q / h_kv
  int seqlen_q = 0;     // fixed-length sizes, or the max seqlens when varlen
  int seqlen_k = 0;
  const int32_t* cu_seqlens_q = nullptr;  // varlen when non-null (device pointers)
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;

  float scale_log2 = 0.f;     // softmax scale * log2(e), or log2(e) when softcap is on
  float softcap_in = 0.f;     // scale / softcap: tanh argument multiplier (softcap on)
  float softcap = 0.f;        // 0 = off
  int window_left = -1;       // -1 = unbounded; causal is window_right = 0
  int window_right = -1;
  int m_blocks = 0;           // q tiles per (batch, head slot) over seqlen_q
  int head_slots = 0;         // head slots per batch: heads_q, or heads_kv * groups when packed
  int batch_heads = 0;        // batch * head_slots
  int tiles = 0;              // m_blocks * batch_heads: the persistent grid's work list

  // GQA head packing (sched/gqa_pack.h): a tile holds pack_heads q heads of one KV head, pack_rows
  // rows each. Row r of a tile is q head `head + (r >> row_head_shift)` at query position
  // `m0 + (r & row_pos_mask)`; unpacked these reduce to head + 0 and m0 + r (r < 256: 128- and
  // 192-row tiles).
  int pack_rows = 0;          // R (a power of two >= seqlen_q); 0 = off
  int pack_heads = 1;         // G: q heads per tile, heads of a slot: kv * q_per_kv + group * G + g
  int row_pos_mask = 255;     // R - 1 when packed
  int row_head_shift = 8;     // log2(R) when packed
  int row8_step = 8;          // position of a thread's second row (tile row + 8) minus its first's:
                              // 0 when R <= 8 (row + 8 is another head at the same position)
  int heavy_first = 0;        // visit tiles longest first (causal, or unmasked with an idle warpgroup's
                              // worth of padding); see sched/tile_order.cuh and sched/gqa_pack.h
  // heavy_first: a sequence's padding rows (rows_q not a multiple of the tile's rows) go
  // to its first m-block. Causal: it sees the fewest keys, the last sees them all: d = 64's
  // 192-row tiles at s = 4096 then run 363 KV blocks per head instead of 384 (H100 A/B
  // 2026-11-22: s 2k 1.05, s 4k 1.04-1.05, s 8k 1.00-1.03). Unmasked: its idle warpgroups make
  // it the light tile, which the order runs last (d = 64 s 1k 1.069, pass 28). The padding rows of
  // every sequence, or -1: each sequence's own, (tile rows - rows_q % tile rows) % tile rows
  // (varlen); 0 = none.
  // Off with the TMA store of O: a store box starting above row 0 is an illegal instruction
  // (GPU tests, d = 96 causal s_q = 200). Local windows gain nothing (equal key counts per m-block).
  int first_block_pad = 0;
  int section_slots = 1;      // heavy_first: (batch, head) slots per L2 section (sched/causal_sections.h)
  TileDivisors div;           // the kernel's tile-order divisors (tile_divisors(), at launch)
};

}  // namespace fastattn::cuda_backend
