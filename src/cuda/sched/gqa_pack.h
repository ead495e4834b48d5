// GQA/MQA head packing for short query sequences (decode, s_q <= 64), chosen on the host.
//
// Unpacked, a tile is one (batch, q head, 128-row m-block): with s_q = 1..64 only s_q of its 128
// rows are real, and the K/V of a KV head is streamed once per q head. Packed, a tile holds G q
// heads of one KV head, R rows each (R = the power of two >= s_q): tile row g * R + i is head
// g at query position i. K/V is streamed once for G heads and the tensor cores do G times the
// useful work per key block.
//
// Rule: fixed-length only (a varlen sequence's rows cannot be addressed as one TMA box per head),
// q_per_kv > 1 and 1 <= s_q <= 64 (so at least two heads fit). Per tile at most 128 / R heads; a KV
// head's q_per_kv heads are split into groups = ceil(q_per_kv / (128 / R)) tiles of
// G = ceil(q_per_kv / groups) heads (balanced: q_per_kv 6 at R = 32 gives 3 + 3, not 4 + 2; the
// last group may hold fewer than G, e.g. 5 = 3 + 2). R is a power of two so that it divides 128:
// the Q box (64 columns, R rows, 128 / R heads) is then exactly the unpacked box's 128 rows, and
// the producer's byte count stays the same. Rows past s_q of a head come zero-filled (out of
// range); rows of heads past the group are other heads' (or zero-filled) Q rows: independent rows of
// the MMA, never stored.
//
// The tile order (sched/tile_order.cuh) then walks (batch, kv head, group) slots, one m-block each;
// all tiles see the same key range, so there is no longest-first (causal) order.
#pragma once

#include <cstdint>

#include "cuda/common/fwd_params.h"

namespace fastattn::cuda_backend {

constexpr int kTileRows = 128;  // query rows per tile (sm90 FwdConfig::kBlockM)

struct GqaPack {
  int rows = 0;    // R: rows per q head; 0 = no packing
  int heads = 1;   // G: q heads per tile
  int groups = 0;  // tiles per (batch, kv head)
};

inline GqaPack choose_gqa_pack(int q_per_kv, int seqlen_q, bool varlen) {
  GqaPack g;
  if (varlen || q_per_kv <= 1 || seqlen_q < 1 || seqlen_q > kTileRows / 2) return g;
  int r = 1;
  while (r < seqlen_q) r *= 2;
  const int per_tile = kTileRows / r;  // >= 2
  g.groups = (q_per_kv + per_tile - 1) / per_tile;
  g.heads = (q_per_kv + g.groups - 1) / g.groups;
  g.rows = r;
  return g;
}

// The tile space of a launch (p's sizes, GQA ratio and window already set): m-blocks of
// `tile_rows` query rows (the sm90 config's kBlockM: 128, or 192 with three consumer warpgroups;
// packed tiles are always 128 rows), head slots, the packing fields and the longest-first
// switch. Returns the tile count, which the caller checks against INT32_MAX before storing it in
// p.tiles.
inline int64_t set_tile_space(FwdParams& p, bool varlen, int tile_rows = kTileRows) {
  const GqaPack pack = choose_gqa_pack(p.q_per_kv, p.seqlen_q, varlen);
  if (pack.rows > 0) {
    int shift = 0;
    while ((1 << shift) < pack.rows) ++shift;
    p.pack_rows = pack.rows;
    p.pack_heads = pack.heads;
    p.row_pos_mask = pack.rows - 1;
    p.row_head_shift = shift;
    p.row8_step = pack.rows >= 16 ? 8 : 0;
    p.m_blocks = 1;
    p.head_slots = p.heads_kv * pack.groups;
  } else {
    p.m_blocks = (p.seqlen_q + tile_rows - 1) / tile_rows;
    p.head_slots = p.heads_q;
  }
  p.batch_heads = int(int64_t(p.head_slots) * p.batch);  // the caller's tile check bounds it
  // Longest first (sched/tile_order.cuh; packed tiles are all one m-block): causal, where a tile's
  // work grows with its m-block; and unmasked fixed-length launches whose partial m-block leaves a
  // 64-row warpgroup without rows (the kernel skips its GEMMs: that tile is the lightest, d = 64's
  // 192-row tiles at s = 1024 or 4096). Either way the padding rows go to the first m-block, the
  // lightest (FwdParams::first_block_pad), which the order visits last in its section.
  const int pad = p.m_blocks * tile_rows - p.seqlen_q;  // fixed length
  const bool causal = p.window_left < 0 && p.window_right >= 0;
  const bool unmasked = p.window_left < 0 && p.window_right < 0;
  p.heavy_first = pack.rows == 0 && (causal || (unmasked && !varlen && pad >= 64));
  p.first_block_pad = !p.heavy_first ? 0 : varlen ? -1 : pad;
  return int64_t(p.m_blocks) * p.head_slots * p.batch;
}

}  // namespace fastattn::cuda_backend
