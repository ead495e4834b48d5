// The block-sparse list builders: the forward's (sm90/fwd/block_lists.h) and the backward's
// (sm90/bwd/block_lists.h), one launch each. One warp per mask line packs the line's kept kernel
// blocks (the forward: a mask row's key blocks; the backward: a mask column's q-blocks), then one warp
// per tile writes the tile's header. Both read the same mask bytes through the line's kept(), so a tile's
// positions (counts of kept blocks below its window's edges) index the line exactly as the line's warp
// packs it, without either waiting for the other.
#include <string>

#include "cuda/mask/block_list_build.h"
#include "cuda/sm90/bwd/block_lists.h"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/stream_alloc.h"
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
  static constexpr bool kBitmask = false;
  static constexpr bool kBias = false;
};

// One line of the mask as a list sees it: the forward's row (a mask q block) over kernel key blocks, the
// backward's column (a mask key block) over kernel q-blocks (BwdColumn, below). A kernel block lies inside
// one mask block (block sizes multiples of the kernel's: block_mask_support); blocks past the mask's cover
// (a varlen maximum above it) keep nothing. Lines read their prep's fields in place (a copy of them into
// a line of its own changed the forward builder's SASS).
struct FwdRow {
  const BlockListPrep& b;
  const uint8_t* row;
  __device__ __forceinline__ int n_blocks() const { return b.n_blocks; }
  __device__ __forceinline__ bool kept(int n) const {  // kernel key block n of the row
    const int kb = int(int64_t(n) * kBlockListTileKeys / b.block_k);
    return n < b.n_blocks && kb < b.k_blocks && row[int64_t(kb) * b.col_stride] != 0;
  }
};

__device__ __forceinline__ FwdRow fwd_line(const BlockListPrep& b, int bm, int hm, int qb) {
  return {b, b.mask + bm * b.batch_stride + hm * b.head_stride + int64_t(qb) * b.row_stride};
}

// Kept blocks of `line` below each of the four edges (edge[i] <= line.n_blocks()), by the whole warp.
template <class Line>
__device__ __forceinline__ void count_below(const Line& line, const int (&edge)[4], int (&below)[4], int lane) {
  for (int i = 0; i < 4; ++i) below[i] = 0;
  const int top = max(max(edge[0], edge[1]), max(edge[2], edge[3]));
  for (int n0 = 0; n0 < top; n0 += 32) {
    const int n = n0 + lane;
    const bool k = n < top && line.kept(n);
#pragma unroll
    for (int i = 0; i < 4; ++i) below[i] += __popc(__ballot_sync(0xffffffffu, k && n < edge[i]));
  }
}

// The line's kept blocks, ascending, packed from `out` (by the whole warp).
template <class Line>
__device__ __forceinline__ void pack_line(const Line& line, int* out, int lane) {
  int filled = 0;
  for (int n0 = 0; n0 < line.n_blocks(); n0 += 32) {
    const int n = n0 + lane;
    const bool k = line.kept(n);
    const unsigned votes = __ballot_sync(0xffffffffu, k);
    if (k) out[filled + __popc(votes & ((1u << lane) - 1u))] = n;
    filled += __popc(votes);
  }
}

__global__ void __launch_bounds__(256) block_lists_kernel(const __grid_constant__ BlockListPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t rows = block_list_rows(b);
  if (item < rows) {  // a mask row: its kept key blocks, packed
    const int qb = int(item % b.q_blocks), hm = int(item / b.q_blocks % b.mask_heads);
    const int bm = int(item / (int64_t(b.q_blocks) * b.mask_heads));
    pack_line(fwd_line(b, bm, hm, qb), b.list + item * b.n_blocks, lane);
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
    count_below(fwd_line(b, bm, hm, qb), edge, below, lane);
    const int base = int((int64_t(bm) * b.mask_heads + hm) * b.q_blocks + qb) * b.n_blocks;
    const cuda_backend::BlockList l = cuda_backend::block_list_at(b.list, base, below);
    h = make_int4(l.begin, l.end, l.full_begin, l.full_end);
  }
  if (lane == 0) b.headers[id] = h;
}


// The backward's prep: its lines are the mask's columns, its tiles the key tiles (bwd/block_lists.h).
struct BwdListPrep : MaskLines {
  cuda_backend::BwdParams p;  // attn, n_blocks (key tiles of block_n), m_blocks (q-blocks of block_m)
  int block_m = 64, block_n = 128;
  int4* headers = nullptr;
  int* list = nullptr;
};

// The backward's line: a mask column (mask key block) over kernel q-blocks of block_m rows.
struct BwdColumn {
  const BwdListPrep& b;
  const uint8_t* col;
  __device__ __forceinline__ int n_blocks() const { return b.p.m_blocks; }
  __device__ __forceinline__ bool kept(int n) const {  // kernel q-block n of the column
    const int qb = int(int64_t(n) * b.block_m / b.block_q);
    return n < b.p.m_blocks && qb < b.q_blocks && col[int64_t(qb) * b.row_stride] != 0;
  }
};

__device__ __forceinline__ BwdColumn bwd_line(const BwdListPrep& b, int bm, int hm, int kb) {
  return {b, b.mask + bm * b.batch_stride + hm * b.head_stride + int64_t(kb) * b.col_stride};
}

__global__ void __launch_bounds__(256) bwd_block_lists_kernel(const __grid_constant__ BwdListPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t lines = int64_t(b.mask_batches) * b.mask_heads * b.k_blocks;
  if (item < lines) {  // a mask column: its kept q-blocks, packed
    const int kb = int(item % b.k_blocks), hm = int(item / b.k_blocks % b.mask_heads);
    const int bm = int(item / (int64_t(b.k_blocks) * b.mask_heads));
    pack_line(bwd_line(b, bm, hm, kb), b.list + item * b.p.m_blocks, lane);
    return;
  }
  const int64_t id = item - lines;
  const cuda_backend::BwdParams& p = b.p;
  if (id >= int64_t(p.attn.batch) * p.attn.heads_kv * p.n_blocks) return;
  const int n_block = int(id % p.n_blocks), rest = int(id / p.n_blocks);
  const int kv_head = rest % p.attn.heads_kv, batch = rest / p.attn.heads_kv;
  // The key tile's window range as the kernel makes it (set_bwd_tile_block's dense branch).
  const cuda_backend::BwdSeq seq(p, batch, b.block_m);
  const cuda_backend::BlockRange r = bwd_key_block_q_blocks(bwd_seq_mask(p, seq), n_block, b.block_n, b.block_m);
  const int kb = int(int64_t(n_block) * b.block_n / b.block_k);
  int4 h = make_int4(0, 0, 0, 0);
  if (!r.empty() && kb < b.k_blocks) {
    const int bm = b.mask_batches == 1 ? 0 : batch, hm = kv_head * p.attn.q_per_kv / b.head_div;
    int edge[4], below[4];
    cuda_backend::block_list_edges(r, edge);
    count_below(bwd_line(b, bm, hm, kb), edge, below, lane);
    const int base = int((int64_t(bm) * b.mask_heads + hm) * b.k_blocks + kb) * b.p.m_blocks;
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

Status prepare_bwd_block_lists(const detail::Problem& problem, int block_m, int block_n, cudaStream_t stream,
                               cuda_backend::BwdParams* p, void** ws) {
  const detail::BlockMaskView& m = problem.blocks;
  BwdListPrep b;
  b.p = *p;
  set_mask_lines(&b, m, p->attn.batch, p->attn.heads_q);
  b.block_m = block_m;
  b.block_n = block_n;
  if (m.head_div % p->attn.q_per_kv != 0)  // block_mask_support refuses it first
    return Status::Unsupported("mask: the CUDA block-sparse backward needs the q heads of a KV head to share a mask head");
  const int64_t tiles = int64_t(p->attn.batch) * p->attn.heads_kv * p->n_blocks;
  const int64_t lines = int64_t(b.mask_batches) * b.mask_heads * b.k_blocks;
  const int64_t entries = lines * p->m_blocks;
  if (entries > INT32_MAX)
    return Status::Unsupported("mask: the block-sparse backward's lists would exceed 2^31 entries");
  const int64_t header_bytes = tiles * int64_t(sizeof(int4));
  *ws = nullptr;
  if (tiles == 0) return Status::Ok();
  if (Status st = cuda_backend::stream_alloc(size_t(header_bytes + entries * 4), stream, "block-sparse q-block lists", ws);
      !st.ok())
    return st;
  b.headers = static_cast<int4*>(*ws);
  b.list = reinterpret_cast<int*>(static_cast<char*>(*ws) + header_bytes);
  p->q_list_headers = reinterpret_cast<const int*>(b.headers);
  p->q_lists = b.list;
  constexpr int kWarps = 8;
  bwd_block_lists_kernel<<<unsigned((lines + tiles + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(b);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    (void)cuda_backend::stream_free(*ws, stream);
    *ws = nullptr;
    return {Code::CudaError, std::string("block-sparse q-block lists launch: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

}  // namespace fastattn::sm90
