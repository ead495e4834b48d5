// The default mode's CTA order under a right-bounded mask (causal, windows with a right edge), host
// and device (the CPU tests check it): the grid's items permuted longest first, and each CTA's walk
// over its steps. A key block's work falls with its index there (key block 0 sees every q-block),
// so block-index order (item = unit x n_blocks + key block) ends the grid on the last unit's
// longest blocks: a tail of ~6% at d128 s 4k-8k by a list-scheduling model over 132 SMs
// (docs/notes/bwd-sm90.md). The permutation takes the longest key blocks first, the units
// (sequence, KV head) in sections of `section`: key block 0 of every unit of a section, then key
// block 1, ..; the last section may be narrower. A section interleaves its units' starts, and a
// unit's key blocks share its Q / dO tiles and dQ runs in L2 only while they run close together,
// so sections stay as narrow as whole units' Q, dO and dQ fitting L2 allows (GQA s 4k: one unit,
// block order; wider was measured slower).
#pragma once

#include "cuda/common/host_device.h"

namespace fastattn::sm90 {

// The block-index item (unit x n_blocks + key block) that the CTA of start order `item` works on.
FASTATTN_HD int bwd_lpt_item(int item, int units, int n_blocks, int section) {
  const int first = item / (section * n_blocks) * section;  // the section's first unit
  const int within = item - first * n_blocks, width = units - first < section ? units - first : section;
  const int n_block = within / width, unit = first + within % width;
  return unit * n_blocks + n_block;
}

// A bias shared by the batch (BwdBias::batch_inner) under longest-first sections: `item` is
// bwd_lpt_item's block-index item, whose unit the sections count batch major (unit = b x heads_kv +
// KV head); returned: the item whose unit is that count taken KV head major, batch minor (count q:
// KV head q / batch, entry q % batch). A round of a section then holds the batch entries of one (KV
// head, key block) side by side, so that their reads of the same bias tile and their dbias adds into
// the same entries meet in L2 (batch major, the b4 adds landed a quarter of the run apart). A
// position keeps its key block, hence its work: the rounds and the sections balance as before.
FASTATTN_HD int bwd_lpt_batch_inner_item(int item, int n_blocks, int batch, int heads_kv) {
  const int q = item / n_blocks, n_block = item - q * n_blocks;
  const int kv_head = q / batch, b = q - kv_head * batch;
  return (b * heads_kv + kv_head) * n_blocks + n_block;
}

// The L2 share that a section's Q, dO and dQ accumulator may take (FA3's figure for its sections).
inline constexpr double kBwdLptL2Bytes = 40.0 * (1 << 20);

// The section width (host): the largest power of two of units (so that it divides the usual head
// counts: a short last section brings the tail back) whose Q, dO and fp32 dQ accumulator (8 d bytes
// per q row and q head of the group) fit `l2_bytes` together, at least 1 and at most `units`.
inline int bwd_lpt_section(int units, int q_per_kv, int seqlen_q, int head_dim, double l2_bytes) {
  const double unit_bytes = double(q_per_kv) * double(seqlen_q > 1 ? seqlen_q : 1) * (8.0 * head_dim);
  const double fit = l2_bytes / unit_bytes < units ? l2_bytes / unit_bytes : double(units);
  int section = 1;
  while (2.0 * section <= fit) section *= 2;
  return section;
}

// Paired key blocks (BwdParams::kv_pair): under a causal mask key block n of a sequence's N sees
// ~N - n q-blocks of its size, so the CTA of pair j works on key blocks j and N - 1 - j, ~N + 1
// together: every CTA of a unit the same length, so that waves end together (the GQA s 4k tail:
// 1.14 x the ideal in block order, 1.03 paired; notes). Pair j of N key blocks: `first` = j and
// `second` = N - 1 - j; returns how many of them there are (2; 1 for the middle block of odd N;
// 0 for j past the pairs).
FASTATTN_HD int bwd_pair_blocks(int j, int n_blocks, int& first, int& second) {
  first = j;
  second = n_blocks - 1 - j;
  return j < second ? 2 : (j == second ? 1 : 0);
}

// The host's rule for a config that builds the longest-first order (BwdConfig::kLptOrder): whether a
// call of `n_blocks` key blocks takes it. d 64 from 16 key blocks (s_k >= 2048) only: beside block
// order it measured +6-8 % at b16 s1k causal, -1.5 % at b8 s2k, -4 % at b4 s4k and b2 s8k (H100,
// session 29, interleaved A/B).
inline bool bwd_longest_first(int head_dim, int n_blocks) { return head_dim != 64 || n_blocks >= 16; }

// The host's rule, for `units` (sequence x KV head) of `n_blocks` key blocks on `sms` SMs: pair where
// the longest-first order cannot act (sections of one unit: block order, whose tail pairing removes)
// and the pairs still fill the SMs (with fewer CTAs than SMs all run at once and the longest single
// block sets the time, which a pair only lengthens). Where sections interleave units, longest first
// already reaches the ideal in the model, and pairs of 2N + 2 steps would quantize the waves (7.76
// -> 8 at d128 s 4k-8k).
inline bool bwd_pair_key_blocks(int lpt_section, int units, int n_blocks, int sms) {
  return lpt_section == 1 && double(units) * ((n_blocks + 1) / 2) >= double(sms);
}

// A CTA's walk over its steps: (q head h, q-block m) over the heads [h_first, h_first + heads) of
// its KV head's group and the q-blocks [begin, end) its key block sees, every pair once.
// kBwdWalkUp: heads outer, q-blocks rising (the deterministic mode's turn order relies on it:
// tile.cuh, dq_last_block). kBwdWalkDown: q-blocks falling from the last, the group's heads inner, so
// that a unit's key blocks which start together read the same Q / dO tile and add into the same dQ
// run in the same step whatever their walk's length (under a causal mask block n starts at q-block
// ~2n): one tile of L2 per unit in flight rather than every head's (GQA causal -14%, notes).
// kBwdWalkUpInner: q-blocks rising, heads inner: a pair's second (short) key block, which starts
// where the first one's downward walk ended, so that the unit's CTAs still meet on one q-block.
enum BwdWalk : int { kBwdWalkUp = 0, kBwdWalkDown = 1, kBwdWalkUpInner = 2 };
FASTATTN_HD void bwd_walk_first(int walk, int h_first, int begin, int end, int& h, int& m) {
  h = h_first;
  m = walk == kBwdWalkDown ? end - 1 : begin;
}
FASTATTN_HD void bwd_walk_next(int walk, int h_first, int heads, int begin, int end, int& h, int& m) {
  if (walk != kBwdWalkUp) {
    if (++h == h_first + heads) {
      h = h_first;
      m += walk == kBwdWalkDown ? -1 : 1;
    }
  } else if (++m == end) {
    m = begin;
    ++h;
  }
}

}  // namespace fastattn::sm90
