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

namespace fastattn::cuda_backend {

constexpr int kPackTileRows = 128;  // query rows of a packed tile (its Q box is one 128-row buffer)

struct GqaPack {
  int rows = 0;    // R: rows per q head; 0 = no packing
  int heads = 1;   // G: q heads per tile
  int groups = 0;  // tiles per (batch, kv head)
};

// `tile_rows`: the tile's query rows, a power of two (the split-D forward packs 64-row tiles: its
// Q box is one 64-row atom).
inline GqaPack choose_gqa_pack(int q_per_kv, int seqlen_q, bool varlen, int tile_rows = kPackTileRows) {
  GqaPack g;
  if (varlen || q_per_kv <= 1 || seqlen_q < 1 || seqlen_q > tile_rows / 2) return g;
  int r = 1;
  while (r < seqlen_q) r *= 2;
  const int per_tile = tile_rows / r;  // >= 2
  g.groups = (q_per_kv + per_tile - 1) / per_tile;
  g.heads = (q_per_kv + g.groups - 1) / g.groups;
  g.rows = r;
  return g;
}

}  // namespace fastattn::cuda_backend
