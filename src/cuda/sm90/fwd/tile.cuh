// The Hopper forward's shared state: its smem layout (Q buffers, the K/V ring, the mbarriers) and
// the tile walk that the producer and the consumer warpgroups follow alike (the schedule's tiles
// of this CTA, each with its sequence, mask and key blocks).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/seqlen.cuh"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sched/tile_order.cuh"
#include "cuda/sm90/fwd/params.h"
#include "cuda/sm90/prim/regs.cuh"
#include "cuda/sm90/prim/tma.cuh"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::sm90 {

// What a CTA receives for the merge in its cluster (cluster_partials.cuh; the partial O rows go to
// the spare Q buffer): the slots' LSEs and the mbarrier that counts the pushed bytes. Cluster-merge
// configs only, empty elsewhere (then one byte in the struct's tail padding: the other members
// keep their offsets).
constexpr int kClusterMergeRows = 64;  // slots a CTA receives (tile rows: the first warpgroup's)
template <class Cfg, bool = Cfg::kClusterMerge>
struct ClusterMergeSmem {};
template <class Cfg>
struct ClusterMergeSmem<Cfg, true> {
  uint64_t full;  // one arrival (the CTA's own, with the bytes it expects) + the pushes' bytes
  float lse[kClusterMergeRows];
};

// Element bitmask (Cfg::kBitmask): the packed bits of the block in K/V ring slot s (128 rows x 4
// words, the prep's slot order: row r's word of quad thread t at r * 4 + t), brought by the producer
// with that block's K tile onto its k_full barrier, so that the consumers read their two words from
// smem after the K wait instead of waiting on a dependent global load chain (list entry, then slot)
// between the QK wgmma and the softmax (docs/notes/masks-sm90.md, "partial-block cost"). Other configs:
// empty (one byte in the struct's tail padding, as ClusterMergeSmem: the other members keep their offsets).
template <class Cfg, bool = Cfg::kBitmask>
struct BitStageSmem {};
template <class Cfg>
struct BitStageSmem<Cfg, true> {
  static constexpr int kSlotWords = 128 * 4;  // one 2 KB slot (fwd/params.h bit_slot)
  alignas(16) uint32_t words[Cfg::kStages][kSlotWords];
  int entry[Cfg::kStages];  // the block's list entry (block * 2 + needs bits), stored before k_full's arrival
};

// Additive bias staged by cp.async (Cfg::kBias, FwdBias::staged): each consumer warp's own 16 rows x
// kBlockN keys of one block (16-bit elements), copied one block ahead by the warp itself and read by
// it alone (a __syncwarp orders its reads before the next copy). Row rr's 16-byte chunk c (keys
// 8c..8c+7) sits at chunk c ^ (rr % 8) of its row: each 8 x 8 matrix an ldmatrix reads (8 rows of one
// chunk), and each word-by-word read (8 rows x 4 words of one chunk), then hits 32 different banks.
// Other configs: empty (one byte in the tail padding).
template <class Cfg, bool = Cfg::kBiasStaged>
struct BiasStageSmem {};
template <class Cfg>
struct BiasStageSmem<Cfg, true> {
  static constexpr int kWarpBytes = 16 * Cfg::kBlockN * 2;
  alignas(128) uint8_t warp[Cfg::kConsumerWarpgroups * 4][kWarpBytes];
};

// The bit stage's smem accesses by address (the struct is reached through an aligned integer, so plain
// accesses compile to generic ones). Volatile with a memory clobber: the consumers' reads must stay
// before the K slot's release, the producer's store before its k_full arrival.
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void sts_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// 4 bytes from global memory into smem without a register (cp.async), and the wait for all of this
// thread's copies (they are then visible to it).
__device__ __forceinline__ void cp_async_u32(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

template <class Cfg>
struct FwdSmem {
  alignas(1024) uint8_t q[Cfg::kQBuffers][Cfg::kQBytes];
  alignas(1024) uint8_t k[Cfg::kStages][Cfg::kAtoms * Cfg::kKVAtomBytes];
  alignas(1024) uint8_t v[Cfg::kStages][Cfg::kVAtoms * Cfg::kKVAtomBytes];
  // q_empty: both consumer warpgroups issued (and waited for) their last QK of that buffer's tile
  uint64_t q_full[Cfg::kQBuffers], q_empty[Cfg::kQBuffers];
  uint64_t k_full[Cfg::kStages], v_full[Cfg::kStages];
  uint64_t k_empty[Cfg::kStages], v_empty[Cfg::kStages];
  // Paged KV cache: where each box of the block in K/V ring slot s lies, (page, position of its
  // first key in the page) (producer.cuh), looked up for its K tile and read again for its V tile.
  int2 kv_boxes[Cfg::kStages][Cfg::kBlockN / 16];
  ClusterMergeSmem<Cfg> merge;
  BitStageSmem<Cfg> bits;
  BiasStageSmem<Cfg> bias;
};


// V's rows [first_row, kBlockN) of ring slot `stage` set to zero by one consumer warpgroup (thread
// t of 128: 16-byte chunk t % 8 of rows t / 8 + 16 i at or past first_row, every atom; unrolled with
// predicated stores: a loop over the rows spilled at d 64), then made visible to
// its own wgmma reads (async proxy) behind the warpgroup's barrier `bar`. For the sequence's last key
// block: TMA reads it whole, and a row past len_k may hold NaN (an uninitialised cache, garbage past
// seqused_k) that P = 0 would carry into O (0 x NaN). A row of a 128-byte-swizzled atom is one
// contiguous 128-byte line (the swizzle permutes its chunks), at row * 128 in its atom; the
// key-half layout (Cfg::kPageHalves) keeps the halves kHalfBytes apart, atoms kKVAtomBytes / 2.
template <class Cfg>
__device__ __forceinline__ void zero_v_rows_from(FwdSmem<Cfg>& sm, int stage, int first_row, int bar) {
  constexpr int N = Cfg::kBlockN;
  const int t = threadIdx.x % 128;
  const uint32_t slot = smem_addr(sm.v[stage]) + (t % 8) * 16;
#pragma unroll
  for (int r = t / 8; r < N; r += 16) {
    if (r < first_row) continue;
#pragma unroll
    for (int a = 0; a < Cfg::kVAtoms; ++a) {
      uint32_t at;
      if constexpr (Cfg::kPageHalves)
        at = (r / (N / 2)) * Cfg::kAtoms * (Cfg::kKVAtomBytes / 2) + a * (Cfg::kKVAtomBytes / 2) + (r % (N / 2)) * 128;
      else
        at = a * Cfg::kKVAtomBytes + r * 128;
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(slot + at), "r"(0) : "memory");
    }
  }
  fence_smem_for_tma();
  named_bar_sync(bar, 128);
}

// The tile being worked on: which sequence, head and query rows, and which KV blocks it visits.
// Packed (GQA, sched/gqa_pack.h): `head` is the first of the tile's q heads, m0 = 0 and [m0, m1)
// the query positions that all its heads share. `Blocks`: the block source (mask/block_source.cuh),
// the window's BlockRange, or a block-sparse kernel's BlockList (FwdTileFor picks it by config).
template <class Blocks>
struct FwdTileOf {
  cuda_backend::SeqInfo seq;
  cuda_backend::WindowMask mask;
  int head, kv_head, m0, m1;
  Blocks blocks;  // its key blocks, walked last first (mask/block_source.cuh)
  int split;      // SplitConfig kernels: which share of the blocks (else unused)
  int batch;      // BiasConfig kernels: the batch index (else unset)
  __device__ __forceinline__ bool sees_keys() const { return blocks.end > blocks.begin; }
};
using FwdTile = FwdTileOf<cuda_backend::BlockRange>;

template <class Cfg>
using FwdTileFor = FwdTileOf<std::conditional_t<
    Cfg::kBitmask, cuda_backend::BitList,
    std::conditional_t<Cfg::kBlockList, cuda_backend::BlockList, cuda_backend::BlockRange>>>;

// With TileSchedule::first_block_pad a sequence's padding rows (rows_q not a multiple of kBlockM) sit
// in its first m-block, whose m0 is then negative: Q rows above the sequence come in as TMA zero
// fill or another sequence's rows, are masked like any row, and are never stored.
// Block-sparse (Cfg::kBlockList): the key blocks are the tile's list (sm90/fwd/block_lists.cuh,
// whose prep kernel builds it from the window range below, make_tile of the base config), read
// from its header; the launch puts no padding in a first m-block (first_block_pad 0), so the tile's
// rows lie in one mask block.
template <class Cfg>
__device__ __forceinline__ FwdTileFor<Cfg> make_tile(const FwdParams& p, int id) {
  int split = 0;
  if constexpr (Cfg::kSplit) {  // id = base tile * splits + split
    const int base = int(p.split.splits.div(unsigned(id)));
    split = id - base * int(p.split.splits.d);
    id = base;
  }
  const cuda_backend::TileCoord c = cuda_backend::tile_coord(p.sched, p.sched.div, p.attn, id);
  cuda_backend::SeqInfo seq(p.attn, c.batch);
  cuda_backend::WindowMask mask{seq.len_k, seq.len_k - seq.len_q, p.attn.window_left, p.attn.window_right};
  const int pad = p.sched.first_block_pad >= 0 ? p.sched.first_block_pad
                                               : (Cfg::kBlockM - seq.rows_q % Cfg::kBlockM) % Cfg::kBlockM;
  FwdTileFor<Cfg> t{seq, mask, c.head, c.kv_head, c.m_block * Cfg::kBlockM - pad, 0, {}};
  t.m1 = min(t.m0 + Cfg::kBlockM, seq.len_q);  // rows [m1, rows_q) are only zero-filled
  if constexpr (Cfg::kBlockList) {
    const int4 h = __ldg(p.blocks.headers + id);
    t.blocks.begin = h.x;
    t.blocks.end = h.y;
    t.blocks.full_begin = h.z;
    t.blocks.full_end = h.w;
    t.blocks.list = p.blocks.list;
    if constexpr (Cfg::kBitmask) t.blocks.line = __ldg(bit_tile_lines(p.blocks, p.sched.tiles) + id);
  } else if (t.m0 < t.m1) {
    t.blocks = cuda_backend::key_blocks(mask, t.m0, t.m1, Cfg::kBlockN);
  }
  if constexpr (Cfg::kBias) t.batch = c.batch;
  if constexpr (Cfg::kSplit) {
    t.split = split;
    t.blocks = cuda_backend::split_share(t.blocks, split, int(p.split.splits.d));
  }
  return t;
}

// A tile is idle for consumer warpgroup wg when none of its 64 rows is stored: all past the
// sequence's end or above its start (first_block_pad; d = 64's 192-row tiles at s = 1024 or 4096
// leave two of three warpgroups so), or, packed where the config allows it (Cfg::kPackedIdle), all
// past the tile's heads (tile row i holds head i >> row_head_shift: a GQA-4 decode's 4 rows leave
// the second warpgroup so). Such a warpgroup computes the tile's first block of the stream only
// (consume's first_block) and skips the others (skip_idle_blocks): one QK and one PV instead of a
// GEMM pair per block, so the tensor cores run the working warpgroups' GEMMs alone (d = 64
// unmasked s 8k 1.03x; docs/notes/fwd-sm90.md).
template <class Cfg, class Blocks>
__device__ __forceinline__ bool idle_for(const FwdParams& p, const FwdTileOf<Blocks>& t, int wg) {
  const int r0 = t.m0 + 64 * wg;
  if (p.sched.pack_heads == 1) return r0 >= t.seq.rows_q || r0 + 64 <= 0;
  if constexpr (!Cfg::kPackedIdle) return false;
  const int heads = min(p.sched.pack_heads, (t.kv_head + 1) * p.attn.q_per_kv - t.head);  // as stored_row's
  return (64 * wg) >> p.sched.row_head_shift >= heads;
}

// The persistent grid's work list: the schedule's tiles, times the splits in a SplitConfig kernel.
// Read from the parameter bank at each use (held in a register across the walk, it changed the
// unsplit kernels' SASS).
template <class Cfg>
__device__ __forceinline__ int tiles(const FwdParams& p) {
  if constexpr (Cfg::kSplit)
    return p.split.tiles;
  else
    return p.sched.tiles;
}

// This CTA's tiles of the persistent schedule (sched/tile_order.cuh), in order, skipping those
// past their sequence's end. Producer and consumers walk it alike.
template <class Cfg>
struct TileWalk {
  int round = 0, id = 0;
  FwdTileFor<Cfg> t;

  __device__ __forceinline__ bool next(const FwdParams& p) {
    for (; round * cuda_backend::cta_count() < tiles<Cfg>(p);) {
      id = cuda_backend::tile_of_round(round++, cuda_backend::cta_index(), cuda_backend::cta_count());
      if (id >= tiles<Cfg>(p)) continue;
      t = make_tile<Cfg>(p, id);
      if (t.m0 < t.seq.rows_q) return true;
    }
    return false;
  }
};

}  // namespace fastattn::sm90
