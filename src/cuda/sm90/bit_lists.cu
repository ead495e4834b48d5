// The element-bitmask prep kernels: the forward's (sm90/fwd/bit_lists.h) and the backward's
// (sm90/bwd/bit_lists.h). One warp per mask block classifies and packs it, then one warp per tile (the
// forward's schedule tile, the backward's key tile) orders its non-empty blocks into its own list.
#include <algorithm>
#include <string>

#include "cuda/mask/bit_order.h"
#include "cuda/mask/block_list_build.h"
#include "cuda/sm90/bwd/bit_lists.h"
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/tile.cuh"
#include "cuda/sm90/fwd/bit_lists.h"
#include "cuda/stream_alloc.h"
#include "cuda/sm90/fwd/tile.cuh"

namespace fastattn::sm90 {
namespace {

using cuda_backend::kBitsEmpty;
using cuda_backend::kBitsFull;
using cuda_backend::kBitsPartial;

// make_tile's view of a BitmaskConfig kernel's tiles: its shape, and the window's block range.
struct BitPrepTiles {
  static constexpr int kBlockM = kBlockListTileRows;
  static constexpr int kBlockN = kBlockListTileKeys;
  static constexpr bool kSplit = false;
  static constexpr bool kBlockList = false;
  static constexpr bool kBitmask = false;
  static constexpr bool kBias = false;
};

// A mask block's words as one warp loads them, for both prep kernels (B: BitListPrep or BwdBitPrep, their cover and
// strides): lane l's rows row0 + 32 c (c < chunks; the others and rows past row_cover read as nothing), each row's
// four words of keys key0 + 32 kw .., masked to the key cover. Returns the warp's class of the block.
template <class B>
__device__ __forceinline__ uint8_t classify_block_words(const B& b, const uint32_t* base, int row0, int chunks, int key0,
                                                        uint32_t (&w)[4][4]) {
  bool any = false, all = true;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int r = row0 + 32 * c;
#pragma unroll
    for (int kw = 0; kw < 4; ++kw) {
      const int k0 = key0 + 32 * kw;  // the word's first key
      const int care_n = c < chunks && r < b.row_cover ? min(max(b.key_cover - k0, 0), 32) : 0;
      const uint32_t care = care_n >= 32 ? 0xffffffffu : (1u << care_n) - 1u;
      w[c][kw] = care != 0 ? __ldg(base + int64_t(r) * b.row_stride + k0 / 32) & care : 0u;
      any = any || w[c][kw] != 0;
      all = all && w[c][kw] == care;
    }
  }
  any = __any_sync(0xffffffffu, any);
  all = __all_sync(0xffffffffu, all);
  return !any ? kBitsEmpty : all ? kBitsFull : kBitsPartial;
}

// Block (line, kb): lane l takes rows l, l + 32, l + 64, l + 96 of the line's q tile, the row's four
// words of the block; the warp votes its class, and a partial block's lanes write their rows' gathered
// words (quad_keep_word of t = 0..3: one 16-byte store a row).
__global__ void __launch_bounds__(256) classify_bits_kernel(const __grid_constant__ BitListPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= bit_lines(b) * b.n_blocks) return;
  const int kb = int(item % b.n_blocks);
  const int64_t line = item / b.n_blocks;
  const int qt = int(line % b.q_tiles), hm = int(line / b.q_tiles % b.mask_heads);
  const int bm = int(line / (int64_t(b.q_tiles) * b.mask_heads));
  const uint32_t* base = b.mask + bm * b.batch_stride + hm * b.head_stride;
  uint32_t w[4][4];
  const uint8_t cls = classify_block_words(b, base, qt * 128 + lane, 4, kb * 128, w);
  if (lane == 0) b.classes[item] = cls;
  if (cls != kBitsPartial) return;
  FwdBlockLists at{b.headers, b.list};
  uint4* slot = reinterpret_cast<uint4*>(const_cast<uint32_t*>(bit_slot(at, item)));
#pragma unroll
  for (int k = 0; k < 4; ++k)
    slot[lane + 32 * k] = make_uint4(cuda_backend::quad_keep_word(w[k], 0), cuda_backend::quad_keep_word(w[k], 1),
                                     cuda_backend::quad_keep_word(w[k], 2), cuda_backend::quad_keep_word(w[k], 3));
}

__global__ void __launch_bounds__(256) bit_tile_lists_kernel(const __grid_constant__ BitListPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t id = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (id >= b.p.sched.tiles) return;
  const FwdTile t = make_tile<BitPrepTiles>(b.p, int(id));  // m0 >= 0: no padded first m-block
  int4 h = make_int4(0, 0, 0, 0);
  int line_slot = 0;
  const int qt = t.m0 / 128;
  if (t.m0 < t.m1 && !t.blocks.empty() && qt < b.q_tiles) {
    const cuda_backend::TileCoord c = cuda_backend::tile_coord(b.p.sched, b.p.sched.div, b.p.attn, int(id));
    const int bm = b.mask_batches == 1 ? 0 : c.batch, hm = t.head / b.head_div;
    const int64_t line = (int64_t(bm) * b.mask_heads + hm) * b.q_tiles + qt;
    line_slot = int(line * b.n_blocks);
    const uint8_t* cls = b.classes + line * b.n_blocks;
    int edge[4];
    cuda_backend::block_list_edges(t.blocks, edge);  // begin, end, full range clipped into them
    const int begin = edge[0], end = min(edge[1], b.n_blocks), fb = edge[2], fe = edge[3];
    int count[3] = {0, 0, 0};
    for (int n0 = begin; n0 < end; n0 += 32) {
      const int n = n0 + lane;
      const int part = n < end ? cuda_backend::bit_list_part(n, cls[n], fb, fe) : -1;
#pragma unroll
      for (int i = 0; i < 3; ++i) count[i] += __popc(__ballot_sync(0xffffffffu, part == i));
    }
    const int base = int(id * b.n_blocks);
    int at[3] = {base, base + count[0], base + count[0] + count[1]};
    for (int n0 = begin; n0 < end; n0 += 32) {
      const int n = n0 + lane;
      const uint8_t k = n < end ? cls[n] : kBitsEmpty;
      const int part = n < end ? cuda_backend::bit_list_part(n, k, fb, fe) : -1;
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const unsigned votes = __ballot_sync(0xffffffffu, part == i);
        if (part == i) b.list[at[i] + __popc(votes & ((1u << lane) - 1u))] = 2 * n + (k == kBitsPartial ? 1 : 0);
        at[i] += __popc(votes);
      }
    }
    h = make_int4(base, base + count[0] + count[1] + count[2], base + count[0], base + count[0] + count[1]);
  }
  if (lane == 0) {
    b.headers[id] = h;
    const_cast<int*>(bit_tile_lines(FwdBlockLists{b.headers, b.list}, b.p.sched.tiles))[id] = line_slot;
  }
}

// The backward's prep (bwd/bit_lists.h): its lines are (mask batch, mask head, key tile of block_n keys),
// its blocks the kernel's q-blocks (block_m rows), its tiles the kernel's key tiles.
struct BwdBitPrep {
  cuda_backend::BwdParams p;       // attn, n_blocks (key tiles), m_blocks (q-blocks)
  const uint32_t* mask = nullptr;  // the caller's words
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;  // in words; 0: broadcast
  int head_div = 1, mask_batches = 1, mask_heads = 1;
  int row_cover = 0, key_cover = 0;
  int k_tiles = 0;                 // key tiles of the key cover
  int block_m = 64, block_n = 128;
  int4* headers = nullptr;
  int* list = nullptr;
  uint8_t* classes = nullptr;
  int list_stride = 0;             // ints per key tile's list row: m_blocks, deterministic mode 2 m_blocks
  int* position = nullptr;         // deterministic mode: per (key tile, q-block) its list position (-1: not
                                   // listed), scratch for the turns kernel; else null
};

__host__ __device__ inline int64_t bwd_bit_lines(const BwdBitPrep& b) {
  return int64_t(b.mask_batches) * b.mask_heads * b.k_tiles;
}

// Block (line, q-block qb): lane l loads, of each of the block's query rows 32 c + l (c < block_m / 32), the
// four words of the key tile (keys 32 kw .. 32 kw + 31); the warp votes the class. A partial block is
// transposed by ballots (key 32 kw + b's bits over the rows 32 c .. 32 c + 31 land in lane b), so that lane l
// holds of its keys l + 32 kw their query words, and writes their S^T words (quad_keep_word of the query
// words: bit 2j + e of quad thread t = query 8j + 2t + e) as one 16-byte store a key.
__global__ void __launch_bounds__(256) classify_bwd_bits_kernel(const __grid_constant__ BwdBitPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int m_blocks = b.p.m_blocks;
  if (item >= bwd_bit_lines(b) * m_blocks) return;
  const int qb = int(item % m_blocks);
  const int64_t line = item / m_blocks;
  const int kt = int(line % b.k_tiles), hm = int(line / b.k_tiles % b.mask_heads);
  const int bm = int(line / (int64_t(b.k_tiles) * b.mask_heads));
  const uint32_t* base = b.mask + bm * b.batch_stride + hm * b.head_stride;
  const int chunks = b.block_m / 32;  // 2 or 4
  uint32_t w[4][4];  // [query chunk c][key word kw]
  const uint8_t cls = classify_block_words(b, base, qb * b.block_m + lane, chunks, kt * b.block_n, w);
  if (lane == 0) b.classes[item] = cls;
  if (cls != kBitsPartial) return;
  uint32_t mine[4][4];  // [key word kw][query chunk c]: key 32 kw + lane's bits over rows 32 c ..
#pragma unroll
  for (int kw = 0; kw < 4; ++kw)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t v = 0;
      if (c < chunks) {
#pragma unroll
        for (int bit = 0; bit < 32; ++bit) {
          const uint32_t votes = __ballot_sync(0xffffffffu, (w[c][kw] >> bit) & 1u);
          if (lane == bit) v = votes;
        }
      }
      mine[kw][c] = v;
    }
  uint4* slot = reinterpret_cast<uint4*>(const_cast<uint32_t*>(bwd_bit_slot(reinterpret_cast<const int*>(b.headers), item)));
#pragma unroll
  for (int kw = 0; kw < 4; ++kw)
    slot[32 * kw + lane] = make_uint4(cuda_backend::quad_keep_word(mine[kw], 0), cuda_backend::quad_keep_word(mine[kw], 1),
                                      cuda_backend::quad_keep_word(mine[kw], 2), cuda_backend::quad_keep_word(mine[kw], 3));
}

// Key tile id (batch, KV head, key block; block-index order): its window range as the kernel makes it
// (set_bwd_tile_block's dense branch), its line's non-empty q-blocks inside it ordered as the forward's
// (bit_list_part: the full ones in both one interval of positions), its header and its line's first slot.
// Deterministic mode (the turns' scratch set): the bit-partial blocks below the first full one are listed
// first (bit_list_det_edges), so that the walk rises as the dense deterministic walk does.
__global__ void __launch_bounds__(256) bwd_bit_tile_lists_kernel(const __grid_constant__ BwdBitPrep b) {
  const int lane = threadIdx.x % 32;
  const int64_t id = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const cuda_backend::BwdParams& p = b.p;
  const int64_t tiles = int64_t(p.attn.batch) * p.attn.heads_kv * p.n_blocks;
  if (id >= tiles) return;
  const int n_block = int(id) % p.n_blocks, rest = int(id) / p.n_blocks;  // tiles < 2^31 (block_mask_support)
  const int kv_head = rest % p.attn.heads_kv, batch = rest / p.attn.heads_kv;
  const cuda_backend::BwdSeq seq(p, batch, b.block_m);
  const cuda_backend::BlockRange r = bwd_key_block_q_blocks(bwd_seq_mask(p, seq), n_block, b.block_n, b.block_m);
  int4 h = make_int4(0, 0, 0, 0);
  int line_slot = 0;
  if (!r.empty() && n_block < b.k_tiles) {
    const int bm = b.mask_batches == 1 ? 0 : batch, hm = kv_head * p.attn.q_per_kv / b.head_div;
    const int64_t line = (int64_t(bm) * b.mask_heads + hm) * b.k_tiles + n_block;
    line_slot = int(line * p.m_blocks);
    const uint8_t* cls = b.classes + line * p.m_blocks;
    int edge[4];
    cuda_backend::block_list_edges(r, edge);
    edge[1] = min(edge[1], p.m_blocks);
    edge[2] = min(edge[2], edge[1]);
    edge[3] = min(edge[3], edge[1]);
    if (b.position != nullptr) cuda_backend::bit_list_det_edges(cls, edge);  // deterministic: rising order
    const int begin = edge[0], end = edge[1], fb = edge[2], fe = edge[3];
    int count[3] = {0, 0, 0};
    for (int n0 = begin; n0 < end; n0 += 32) {
      const int n = n0 + lane;
      const int part = n < end ? cuda_backend::bit_list_part(n, cls[n], fb, fe) : -1;
#pragma unroll
      for (int i = 0; i < 3; ++i) count[i] += __popc(__ballot_sync(0xffffffffu, part == i));
    }
    const int base = int(id) * b.list_stride;
    int at[3] = {base, base + count[0], base + count[0] + count[1]};
    for (int n0 = begin; n0 < end; n0 += 32) {
      const int n = n0 + lane;
      const uint8_t k = n < end ? cls[n] : kBitsEmpty;
      const int part = n < end ? cuda_backend::bit_list_part(n, k, fb, fe) : -1;
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const unsigned votes = __ballot_sync(0xffffffffu, part == i);
        if (part == i) {
          const int pos = at[i] + __popc(votes & ((1u << lane) - 1u));
          b.list[pos] = 2 * n + (k == kBitsPartial ? 1 : 0);
          if (b.position != nullptr) b.position[int(id) * p.m_blocks + n] = pos;  // for the turns kernel
        }
        at[i] += __popc(votes);
      }
    }
    h = make_int4(base, base + count[0] + count[1] + count[2], base + count[0], base + count[0] + count[1]);
  }
  if (lane == 0) {
    b.headers[id] = h;
    const_cast<int*>(bwd_bit_tile_lines(reinterpret_cast<const int*>(b.headers), tiles))[id] = line_slot;
  }
}

// Deterministic mode, after the lists: one thread per (batch, KV head, q-block) walks the key tiles from the
// top down; at each tile that lists the q-block it writes the count of such tiles above, the tile's dQ turn,
// beside the list entry (bwd/bit_lists.h bwd_bit_dq_turn). Neighbouring threads take neighbouring q-blocks:
// the same row of the positions, coalesced.
__global__ void __launch_bounds__(256) bwd_bit_dq_turns_kernel(const __grid_constant__ BwdBitPrep b) {
  const cuda_backend::BwdParams& p = b.p;
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= int64_t(p.attn.batch) * p.attn.heads_kv * p.m_blocks) return;
  const int64_t unit = id / p.m_blocks;  // batch * heads_kv + KV head: its tiles' header indices
  const int* position = b.position + unit * p.n_blocks * p.m_blocks + id % p.m_blocks;
  int above = 0;
  for (int n = p.n_blocks - 1; n >= 0; --n) {
    const int pos = position[int64_t(n) * p.m_blocks];
    if (pos >= 0) b.list[pos + p.m_blocks] = above++;
  }
}

}  // namespace

Status prepare_bwd_bit_lists(const detail::Problem& problem, int block_m, int block_n, cudaStream_t stream,
                             cuda_backend::BwdParams* p, void** ws) {
  const detail::BitMaskView& m = problem.bits;
  BwdBitPrep b;
  b.p = *p;
  b.mask = m.data;
  b.batch_stride = m.batch_stride;
  b.head_stride = m.head_stride;
  b.row_stride = m.row_stride;
  b.head_div = m.head_div;
  b.mask_batches = m.batch_stride == 0 ? 1 : p->attn.batch;
  b.mask_heads = p->attn.heads_q / m.head_div;
  b.row_cover = std::min(m.rows, p->attn.seqlen_q);
  b.key_cover = int(std::min<int64_t>(int64_t(m.words) * 32, p->attn.seqlen_k));
  b.k_tiles = (b.key_cover + block_n - 1) / block_n;
  b.block_m = block_m;
  b.block_n = block_n;
  *ws = nullptr;
  if (block_n != 128 || (block_m != 64 && block_m != 128))  // the slot is 128 key rows; a word holds 32 queries
    return {Code::Internal, "bitmask backward: the prep packs 128-key tiles of 64- or 128-row q-blocks"};
  if (m.head_div % p->attn.q_per_kv != 0)  // block_mask_support refuses it first
    return Status::Unsupported("mask: the CUDA bitmask backward needs the q heads of a KV head to share a mask head");
  const int64_t tiles = int64_t(p->attn.batch) * p->attn.heads_kv * p->n_blocks;
  // Deterministic mode: each list row twice as wide, the dQ turns beside the entries (bwd_bit_dq_turn).
  b.list_stride = p->deterministic ? 2 * p->m_blocks : p->m_blocks;
  const int64_t slots = bwd_bit_lines(b) * p->m_blocks, entries = tiles * b.list_stride;
  const int64_t scratch = p->deterministic ? tiles * p->m_blocks : 0;  // the turns kernel's positions
  if (slots > INT32_MAX || entries > INT32_MAX)  // block_mask_support refuses it first (deterministic: 2^30)
    return Status::Unsupported("mask: the bitmask backward's lists would exceed 2^31 entries");
  if (tiles == 0) return Status::Ok();
  const int64_t packed_bytes = slots * kBwdBitSlotWords * 4, header_bytes = tiles * int64_t(sizeof(int4));
  const int64_t bytes = packed_bytes + header_bytes + tiles * 4 + (entries + scratch) * 4 + slots;
  if (Status st = cuda_backend::stream_alloc(size_t(bytes), stream, "bitmask q-block lists", ws); !st.ok()) return st;
  char* at = static_cast<char*>(*ws) + packed_bytes;  // the packed slots lie below the headers (bwd_bit_slot)
  b.headers = reinterpret_cast<int4*>(at);
  b.list = reinterpret_cast<int*>(at + header_bytes + tiles * 4);  // after the tile lines (bwd_bit_tile_lines)
  if (scratch > 0) b.position = b.list + entries;
  b.classes = reinterpret_cast<uint8_t*>(at + header_bytes + tiles * 4 + (entries + scratch) * 4);
  p->q_list_headers = reinterpret_cast<const int*>(b.headers);
  p->q_lists = b.list;
  constexpr int kWarps = 8;
  cudaError_t e = cudaSuccess;
  if (scratch > 0) e = cudaMemsetAsync(b.position, 0xff, size_t(scratch) * 4, stream);  // -1: not listed
  if (slots > 0)
    classify_bwd_bits_kernel<<<unsigned((slots + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(b);
  bwd_bit_tile_lists_kernel<<<unsigned((tiles + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(b);
  if (scratch > 0) {
    const int64_t units = int64_t(p->attn.batch) * p->attn.heads_kv * p->m_blocks;
    bwd_bit_dq_turns_kernel<<<unsigned((units + 255) / 256), 256, 0, stream>>>(b);
  }
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cuda_backend::stream_free(*ws, stream);
    *ws = nullptr;
    return {Code::CudaError, std::string("bitmask q-block lists launch: ") + cudaGetErrorString(e)};
  }
  return Status::Ok();
}

Status build_bit_lists(const BitListPrep& b, cudaStream_t stream) {
  if (b.p.sched.tiles == 0) return Status::Ok();
  constexpr int kWarps = 8;
  const int64_t blocks = bit_lines(b) * b.n_blocks;
  if (blocks > 0) classify_bits_kernel<<<unsigned((blocks + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(b);
  bit_tile_lists_kernel<<<unsigned((b.p.sched.tiles + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(b);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {Code::CudaError, std::string("bitmask lists launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace fastattn::sm90
