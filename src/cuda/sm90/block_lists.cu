// The block-sparse forward's list builder (sm90/fwd/block_lists.h): one warp per mask row, then
// one warp per schedule tile, in one launch. Both read the same mask bytes through kept_block, so a
// tile's positions (counts of kept blocks below its window's edges) index the row exactly as the
// row's warp packs it, without either waiting for the other.
#include <string>

#include "cuda/mask/block_list_build.h"
#include "cuda/sm90/fwd/block_lists.h"
#include "cuda/sm90/fwd/tile.cuh"

namespace fastattn::sm90 {
namespace {

// make_tile's view of a BlockSparseConfig kernel's tiles: its tile shape, and the window's block
// range (not the list, which this kernel writes).
struct PrepTiles {
  static constexpr int kBlockM = kBlockListTileRows;
  static constexpr int kBlockN = kBlockListTileKeys;
  static constexpr bool kSplit = false;
  static constexpr bool kBlockList = false;
};

// Whether kernel key block n of mask row (bm, hm, qb) is kept: its mask block's byte. A kernel
// block lies inside one mask block (block_k % 128 == 0); mask columns past k_blocks (a varlen
// max_seqlen_k above the mask's cover) keep nothing.
__device__ __forceinline__ bool kept_block(const BlockListPrep& b, const uint8_t* row, int n) {
  const int kb = int(int64_t(n) * kBlockListTileKeys / b.block_k);
  return n < b.n_blocks && kb < b.k_blocks && row[int64_t(kb) * b.col_stride] != 0;
}

__device__ __forceinline__ const uint8_t* mask_row(const BlockListPrep& b, int bm, int hm, int qb) {
  return b.mask + bm * b.batch_stride + hm * b.head_stride + int64_t(qb) * b.row_stride;
}

// Kept blocks of `row` below each of the four edges (edge[i] <= b.n_blocks), by the whole warp.
__device__ __forceinline__ void count_below(const BlockListPrep& b, const uint8_t* row, const int (&edge)[4],
                                            int (&below)[4], int lane) {
  for (int i = 0; i < 4; ++i) below[i] = 0;
  const int top = max(max(edge[0], edge[1]), max(edge[2], edge[3]));
  for (int n0 = 0; n0 < top; n0 += 32) {
    const int n = n0 + lane;
    const bool k = n < top && kept_block(b, row, n);
#pragma unroll
    for (int i = 0; i < 4; ++i) below[i] += __popc(__ballot_sync(0xffffffffu, k && n < edge[i]));
  }
}

__global__ void __launch_bounds__(256) block_lists_kernel(const __grid_constant__ BlockListPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t rows = block_list_rows(b);
  if (item < rows) {  // a mask row: its kept key blocks, packed
    const int qb = int(item % b.q_blocks), hm = int(item / b.q_blocks % b.mask_heads);
    const int bm = int(item / (int64_t(b.q_blocks) * b.mask_heads));
    const uint8_t* row = mask_row(b, bm, hm, qb);
    int* out = b.list + item * b.n_blocks;
    int filled = 0;
    for (int n0 = 0; n0 < b.n_blocks; n0 += 32) {
      const int n = n0 + lane;
      const bool k = kept_block(b, row, n);
      const unsigned votes = __ballot_sync(0xffffffffu, k);
      if (k) out[filled + __popc(votes & ((1u << lane) - 1u))] = n;
      filled += __popc(votes);
    }
    return;
  }
  const int64_t id = item - rows;
  if (id >= b.p.sched.tiles) return;
  // The tile as the kernel makes it (its m0 >= 0: block-sparse launches pad no first m-block).
  const FwdTile t = make_tile<PrepTiles>(b.p, int(id));
  int4 h = make_int4(0, 0, 0, 0);
  const int qb = t.m0 / b.block_q;  // q blocks past the mask's cover (validation forbids them) keep nothing
  if (t.m0 < t.m1 && !t.blocks.empty() && qb < b.q_blocks) {
    const cuda_backend::TileCoord c = cuda_backend::tile_coord(b.p.sched, b.p.sched.div, b.p.attn, int(id));
    const int bm = b.mask_batches == 1 ? 0 : c.batch, hm = t.head / b.head_div;
    int edge[4], below[4];
    cuda_backend::block_list_edges(t.blocks, edge);
    count_below(b, mask_row(b, bm, hm, qb), edge, below, lane);
    const int base = int((int64_t(bm) * b.mask_heads + hm) * b.q_blocks + qb) * b.n_blocks;
    const cuda_backend::BlockList l = cuda_backend::block_list_at(b.list, base, below);
    h = make_int4(l.begin, l.end, l.full_begin, l.full_end);
  }
  if (lane == 0) b.headers[id] = h;
}

}  // namespace

Status build_block_lists(const BlockListPrep& b, cudaStream_t stream) {
  const int64_t items = block_list_rows(b) + b.p.sched.tiles;
  if (b.p.sched.tiles == 0) return Status::Ok();
  constexpr int kWarps = 8;
  const int64_t blocks = (items + kWarps - 1) / kWarps;
  block_lists_kernel<<<unsigned(blocks), 32 * kWarps, 0, stream>>>(b);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {Code::CudaError, std::string("block-sparse lists launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace fastattn::sm90
