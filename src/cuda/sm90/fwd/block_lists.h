// The block-sparse forward's per-launch lists (BlockSparseConfig kernels): from the caller's block
// mask and the launch's schedule, before the attention kernel, on its stream (graph-capturable):
//   list     one row per mask row (mask batch, mask head, q block): the kernel key blocks
//            (kBlockN keys) whose mask block is kept, ascending, packed from the row's start; a row
//            holds room for every key block of the longest sequence (n_blocks);
//   headers  one int4 per schedule tile: its BlockList (mask/block_source.cuh): positions into
//            `list` of its row's kept blocks inside its window range, and of the window's full ones.
// The tile arithmetic is the kernel's (make_tile of a 128 x 128 config, sched/tile_order.cuh), so
// the headers index the tiles exactly as the kernel walks them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/sm90/fwd/params.h"
#include "cuda/sm90/mask_lines.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {

constexpr int kBlockListTileRows = 128, kBlockListTileKeys = 128;  // BlockSparseConfig's tile

struct BlockListPrep : MaskLines {
  FwdParams p;                      // attn and sched as the kernel gets them
  int n_blocks = 0;                 // kernel key blocks per row: ceil(seqlen_k / 128)
  int4* headers = nullptr;          // p.sched.tiles
  int* list = nullptr;              // mask_batches * mask_heads * q_blocks * n_blocks
};

// Rows of the list (the caller sizes the workspace: headers, then the list).
FASTATTN_HD int64_t block_list_rows(const BlockListPrep& b) { return int64_t(b.mask_batches) * b.mask_heads * b.q_blocks; }

// Writes b.list and b.headers on `stream` (one launch; nothing when there are no tiles).
Status build_block_lists(const BlockListPrep& b, cudaStream_t stream);

}  // namespace fastattn::sm90
