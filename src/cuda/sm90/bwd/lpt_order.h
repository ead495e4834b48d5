// The default mode's CTA order under a causal mask, as a permutation of the grid's items (host and
// device: the CPU tests check it). A key block's work falls with its index there (key block 0 sees
// every q-block), so block-index order (item = unit x n_blocks + key block) ends each unit's run of
// key blocks on its shortest and starts the next unit's on its longest, and the grid ends on the
// last unit's longest blocks: a tail of ~6% at d128 s 4k-8k (a list-scheduling model over 132
// SMs; docs/notes/bwd-sm90.md). Here the longest key blocks go first over the whole grid, the units
// (sequence, KV head) in sections of `section` whose Q / dO / dQ fit in L2 together: key block 0
// of every unit of a section, then key block 1, ..; the last section may be narrower.
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

// The L2 share that a section's Q, dO and dQ accumulator may take (FA3's figure for its sections).
inline constexpr double kBwdLptL2Bytes = 40.0 * (1 << 20);

// The section width (host): the largest power of two of units (so that it divides the usual head
// counts: a short last section brings the tail back) whose Q, dO and fp32 dQ accumulator (8 d bytes
// per q row and q head) fit `l2_bytes` together, at least 1 and at most `units`.
inline int bwd_lpt_section(int units, int q_per_kv, int seqlen_q, int head_dim, double l2_bytes) {
  const double unit_bytes = double(q_per_kv) * double(seqlen_q > 1 ? seqlen_q : 1) * (8.0 * head_dim);
  const double fit = l2_bytes / unit_bytes < units ? l2_bytes / unit_bytes : double(units);
  int section = 1;
  while (2.0 * section <= fit) section *= 2;
  return section;
}

}  // namespace fastattn::sm90
