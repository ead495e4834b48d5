// The Hopper forward kernel's parameter struct: the problem every family shares, the schedule, and
// the sm90 forward's own store mode for O. One __grid_constant__ argument; field order is the
// parameter-bank layout (the schedule's fields keep their offsets, see docs/notes/arch-refactor.md).
#pragma once

#include <vector_types.h>  // int4

#include "cuda/common/attn_params.h"
#include "cuda/common/host_device.h"
#include "cuda/common/kv_cache_params.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::sm90 {

// How the epilogue writes O (chosen by the launch from the config and out's layout).
struct alignas(8) FwdStoreMode {
  int out_tma = 0;    // store O through smem with TMA (fixed-length, TMA-compatible out layout)
  int out_vec16 = 0;  // out's base and row strides are 16-byte aligned: 16-byte register stores
};

// Split-KV (SplitConfig kernels only; the unsplit kernels never read it). Tile id = base tile *
// splits + split, the base tile being the unsplit schedule's (sched). Partial row of (batch b,
// q head h, token t of the packed or per-batch token axis) = (b * heads_q + h) * rows_per_head + t,
// the combine's (b, h, i) order (cuda/split_combine.h): o_part (splits, rows, d_v), lse_part
// (splits, rows), fp32.
struct FwdSplit {
  int tiles = 0;                  // sched.tiles * splits: the persistent grid's work list
  cuda_backend::FastDiv splits;   // splits per base tile
  float* o_part = nullptr;
  float* lse_part = nullptr;
  int64_t rows = 0;               // rows of one split's partials
  int64_t rows_per_head = 0;      // seqlen_q, or total_q when varlen (o_part, lse_part, rows and
                                  // rows_per_head unused by cluster-merge configs: kClusterMerge)
};

// Block-sparse (BlockSparseConfig kernels only; the others never read it): per schedule tile, its
// header (int4: BlockList's begin, end, full_begin, full_end, positions into `list`), and the lists
// of kept key blocks they point into (sm90/fwd/block_lists.cuh).
struct FwdBlockLists {
  const int4* headers = nullptr;
  const int* list = nullptr;
};

// Element bitmask (BitmaskConfig kernels only): the lists and headers are `blocks`' (each tile's own
// list); the rest of the prep's workspace (sm90/fwd/bit_lists.h) lies around the headers, so that the
// parameters (and the block-sparse prep's, which embeds them) keep their layout: after the headers
// one int per tile, the first packed slot of its mask line (BitList::line); before them the packed
// bits of the partial blocks, slot s in the 2 KB below slot s - 1's (128 rows x 4 words: row r's word
// of quad thread t at r * 4 + t).
FASTATTN_HD const int* bit_tile_lines(const FwdBlockLists& b, int tiles) {
  return reinterpret_cast<const int*>(b.headers + tiles);
}
FASTATTN_HD const uint32_t* bit_slot(const FwdBlockLists& b, int64_t slot) {
  return reinterpret_cast<const uint32_t*>(b.headers) - (slot + 1) * 512;
}

// Additive bias (BiasConfig kernels only): element (batch b, q head h, row i, key j) at
// data + b * batch_stride + (h / head_div) * head_stride + i * row_stride + j, in elements of the
// kernel's input type (a shared dim's stride is 0).
struct FwdBias {
  const void* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  int head_div = 1;
  // Every key pair (2 j, 2 j + 1) of every row starts 4-byte aligned (aligned base, even strides): one
  // 32-bit load a pair. Else two 16-bit loads (odd lengths' contiguous biases).
  bool paired = true;
  // Base 16-byte aligned and every stride a multiple of 8 elements: each warp copies its rows' bias of
  // a whole block into smem by cp.async one block ahead (BiasStageSmem, fwd/mainloop.cuh); else (or
  // FASTATTN_BIAS_STAGED=0) every block loads it from global memory in the softmax's path.
  bool staged = false;
  // Full blocks through the plain loop body (the bias added there, before its mask); false
  // (FASTATTN_BIAS_PLAIN=0) runs every block in the generic body, for A/B in one process.
  bool plain = true;
  // ALiBi (AttnArgs::alibi_slopes) instead of a stored bias: data is the fp32 slopes, slope (b, h) at
  // b * batch_stride + h, and the term -slope |row + len_k - len_q - key| is computed (paired and staged
  // false). In the padding after the flags: FwdParams' layout is unchanged.
  bool alibi = false;
};

// Appended after the fields the unsplit kernels read, so that their parameter offsets (and SASS)
// stay as they were.
struct FwdParams {
  cuda_backend::AttnParams attn;
  cuda_backend::TileSchedule sched;
  FwdStoreMode store;
  cuda_backend::KvCacheParams kv;  // where K/V rows live when reading a KV cache (producer.cuh)
  FwdSplit split;
  FwdBlockLists blocks;  // BlockSparseConfig kernels only
  FwdBias bias;          // BiasConfig kernels only
};

}  // namespace fastattn::sm90
