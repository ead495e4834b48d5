// The block-sparse backward's per-launch lists (BlockSparseBwdConfig kernels, config.h): the column view
// of the forward's lists (fwd/block_lists.h), built by the same prep code (sm90/block_lists.cu) on the
// call's stream ahead of the preprocess:
//   q_lists         one row per mask column (mask batch, mask head, key block of the mask): the kernel
//                   q-blocks (block_m rows) whose mask block is kept, ascending; room for m_blocks each;
//   q_list_headers  one int4 per key tile (batch, KV head, key block of block_n keys, block-index order):
//                   its BlockList (mask/block_source.cuh), positions into q_lists of the kept q-blocks
//                   inside the tile's window range (query_blocks) and of the window's full ones.
// A KV head's q heads share one list, so their mask head must be one (block_mask_rule.h refuses else).
#pragma once

#include <cuda_runtime.h>

#include "api/problem.h"
#include "cuda/common/bwd_params.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {

// Sizes p's lists from problem's mask, allocates them stream-ordered (*ws: freed by the caller behind the
// kernel) and builds them on `stream`; sets p->q_list_headers and p->q_lists.
Status prepare_bwd_block_lists(const detail::Problem& problem, int block_m, int block_n, cudaStream_t stream,
                               cuda_backend::BwdParams* p, void** ws);

}  // namespace fastattn::sm90
