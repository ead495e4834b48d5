// The element-bitmask forward's prep kernels (sm90/fwd/bit_lists.h): one warp per mask block classifies
// and packs it, then one warp per schedule tile orders its kept blocks into its own list.
#include <string>

#include "cuda/mask/bit_order.h"
#include "cuda/mask/block_list_build.h"
#include "cuda/sm90/fwd/bit_lists.h"
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
};

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
  bool any = false, all = true;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int r = qt * 128 + lane + 32 * k;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int key0 = kb * 128 + 32 * q;  // the word's first key
      const int care_n = r < b.row_cover ? min(max(b.key_cover - key0, 0), 32) : 0;
      const uint32_t care = care_n >= 32 ? 0xffffffffu : (1u << care_n) - 1u;
      w[k][q] = care != 0 ? __ldg(base + int64_t(r) * b.row_stride + key0 / 32) & care : 0u;
      any = any || w[k][q] != 0;
      all = all && w[k][q] == care;
    }
  }
  any = __any_sync(0xffffffffu, any);
  all = __all_sync(0xffffffffu, all);
  const uint8_t cls = !any ? kBitsEmpty : all ? kBitsFull : kBitsPartial;
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

}  // namespace

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
