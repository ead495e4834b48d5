// A block mask as the list builders read it (sm90/block_lists.cu): the caller's bytes with their
// strides, and how many mask batches / heads / q blocks / key blocks there are. The forward's and the
// backward's preps (fwd/block_lists.h, block_lists.cu) both start with it.
#pragma once

#include <cstdint>

#include "api/problem.h"

namespace fastattn::sm90 {

struct MaskLines {
  const uint8_t* mask = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0, col_stride = 0;  // batch_stride 0: shared
  int head_div = 1;  // q heads per mask head
  int mask_batches = 1, mask_heads = 1, q_blocks = 0, k_blocks = 0;
  int block_q = 128, block_k = 128;
};

// The lines of a validated mask `m` of a call with `batch` entries and `heads_q` query heads.
inline void set_mask_lines(MaskLines* l, const detail::BlockMaskView& m, int batch, int heads_q) {
  l->mask = m.data;
  l->batch_stride = m.batch_stride;
  l->head_stride = m.head_stride;
  l->row_stride = m.row_stride;
  l->col_stride = m.col_stride;
  l->head_div = m.head_div;
  l->mask_batches = m.batch_stride == 0 ? 1 : batch;
  l->mask_heads = heads_q / m.head_div;
  l->q_blocks = m.q_blocks;
  l->k_blocks = m.k_blocks;
  l->block_q = m.block_q;
  l->block_k = m.block_k;
}

}  // namespace fastattn::sm90
