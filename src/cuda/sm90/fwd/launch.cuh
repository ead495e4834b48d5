// Host launch of the Hopper forward for one (dtype, head dim): tensor maps, smem size, grid.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include "cuda/device_info.h"
#include "cuda/env_switch.h"
#include "cuda/launch_plan.h"
#include "cuda/sched/split_plan.h"
#include "cuda/split_forward.h"
#include "cuda/stream_alloc.h"
#include "cuda/sm90/fwd/api.h"
#include "cuda/sm90/fwd/bit_lists.h"
#include "cuda/sm90/fwd/block_lists.h"
#include "cuda/sm90/fwd/kernel.cuh"
#include "cuda/tma_map.h"

namespace fastattn::sm90 {

static_assert(kMaxClusterSplits == cuda_backend::kClusterMaxSplits && kClusterMergeRows == cuda_backend::kClusterKeptRows,
              "the host's cluster rule and the kernel's merge agree");

using FwdKernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, FwdParams);


template <class Cfg>
constexpr int fwd_smem_bytes() {
  return int(sizeof(FwdSmem<Cfg>)) + 1024;  // + slack to align the base to 1024
}

// A launch of Cfg's kernel on `ctas` CTAs in clusters of `splits` along x (`attr`: the cluster dims).
template <class Cfg>
cudaLaunchConfig_t cluster_launch(int ctas, int splits, int smem, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(splits);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters of `splits` CTAs of Cfg's split kernel for T fit on the device at once (asked once
// per kernel and split count; sets the kernel's smem size first, as launch_cfg does). 0 where the
// device cannot say (the query's error is cleared): the combine kernel then merges. Per kernel, not per
// config: fp16 and bf16 share the config, and with one flag the second dtype's query ran without its
// smem attribute, failed, and kept that split count off the cluster merge for the process (session 50).
template <class T, class Cfg>
int clusters_at_once(int smem, int splits) {
  const FwdKernel kernel = fwd_kernel<T, Cfg>;
  // Per device (a MIG slice or a smaller part holds fewer) and split count; 0: not asked yet, -1: no answer.
  static std::atomic<int> cached[cuda_backend::kMaxCachedDevices][cuda_backend::kClusterMaxSplits + 1] = {};
  static cuda_backend::PerDeviceFlags attr_set;
  int dev = 0;
  if (splits < 2 || splits > cuda_backend::kClusterMaxSplits || !cuda_backend::current_device(&dev).ok() || dev < 0 ||
      dev >= cuda_backend::kMaxCachedDevices)
    return 0;
  std::atomic<int>& known = cached[dev][splits];
  if (known.load(std::memory_order_relaxed) == 0) {
    const void* fn = reinterpret_cast<const void*>(kernel);
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cluster_launch<Cfg>(splits, splits, smem, nullptr, &attr);
    int n = 0;
    const bool asked = cuda_backend::set_max_dynamic_smem(fn, smem, attr_set).ok() &&
                       cudaOccupancyMaxActiveClusters(&n, fn, &cfg) == cudaSuccess;
    if (!asked) (void)cudaGetLastError();  // this query's own error
    known.store(asked && n > 0 ? n : -1, std::memory_order_relaxed);
  }
  const int n = known.load(std::memory_order_relaxed);
  return n > 0 ? n : 0;
}

// The split kernel with one CTA per split tile, a cluster of `splits` CTAs per base tile (tile id
// = base tile x splits + split, so a cluster's rank is its CTA's split).
template <class Cfg>
Status launch_in_clusters(FwdKernel kernel, int ctas, int splits, int smem, cudaStream_t stream, const CUtensorMap& tq,
                          const CUtensorMap& tk, const CUtensorMap& tv, const CUtensorMap& to, const FwdParams& params) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_launch<Cfg>(ctas, splits, smem, stream, &attr);
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, tq, tk, tv, to, params);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) return {Code::CudaError, std::string("forward launch (clusters): ") + cudaGetErrorString(e)};
  return Status::Ok();
}

// Block-sparse launches: the block lists of params' schedule from the problem's mask, in a
// stream-ordered workspace (*ws, freed by the caller after the kernel), and params.blocks on them.
inline Status prepare_block_lists(const cuda_backend::LaunchProblem& lp, cudaStream_t stream, FwdParams* params,
                                  void** ws) {
  BlockListPrep b;
  b.p = *params;
  set_mask_lines(&b, lp.problem->blocks, lp.attn.batch, lp.attn.heads_q);
  b.n_blocks = (lp.attn.seqlen_k + kBlockListTileKeys - 1) / kBlockListTileKeys;
  const int64_t header_bytes = int64_t(params->sched.tiles) * int64_t(sizeof(int4));
  const int64_t entries = block_list_rows(b) * b.n_blocks;
  if (entries > INT32_MAX)  // block_mask_support refuses it first
    return Status::Unsupported("mask: the block-sparse lists would exceed 2^31 entries");
  if (Status st = cuda_backend::stream_alloc(size_t(header_bytes + entries * 4), stream, "block-sparse block lists", ws);
      !st.ok())
    return st;
  b.headers = static_cast<int4*>(*ws);
  b.list = reinterpret_cast<int*>(static_cast<char*>(*ws) + header_bytes);
  params->blocks.headers = b.headers;
  params->blocks.list = b.list;
  Status st = build_block_lists(b, stream);
  if (!st.ok()) (void)cuda_backend::stream_free(*ws, stream);
  return st;
}

// Element-bitmask launches: the packed bits, block classes, tile lists and headers of params' schedule
// from the problem's bits, in one stream-ordered workspace (*ws, freed by the caller after the kernel),
// and params.blocks on them (the kernel finds the rest from the headers: fwd/params.h).
inline Status prepare_bit_lists(const cuda_backend::LaunchProblem& lp, cudaStream_t stream, FwdParams* params,
                                void** ws) {
  const detail::Problem& pr = *lp.problem;
  const detail::BitMaskView& m = pr.bits;
  BitListPrep b;
  b.p = *params;
  b.mask = m.data;
  b.batch_stride = m.batch_stride;
  b.head_stride = m.head_stride;
  b.row_stride = m.row_stride;
  b.head_div = m.head_div;
  b.mask_batches = m.batch_stride == 0 ? 1 : lp.attn.batch;
  b.mask_heads = lp.attn.heads_q / m.head_div;
  b.row_cover = std::min(m.rows, lp.attn.seqlen_q);
  b.key_cover = int(std::min<int64_t>(int64_t(m.words) * 32, lp.attn.seqlen_k));
  b.q_tiles = (b.row_cover + kBlockListTileRows - 1) / kBlockListTileRows;
  b.n_blocks = (lp.attn.seqlen_k + kBlockListTileKeys - 1) / kBlockListTileKeys;
  const int64_t tiles = params->sched.tiles, slots = bit_lines(b) * b.n_blocks, entries = tiles * b.n_blocks;
  if (slots > INT32_MAX || entries > INT32_MAX)  // block_mask_support refuses it first
    return Status::Unsupported("mask: the bitmask lists would exceed 2^31 entries");
  const int64_t packed_bytes = slots * kBitSlotWords * 4, header_bytes = tiles * int64_t(sizeof(int4));
  const int64_t bytes = packed_bytes + header_bytes + tiles * 4 + entries * 4 + slots;
  if (Status st = cuda_backend::stream_alloc(size_t(bytes), stream, "bitmask block lists", ws); !st.ok()) return st;
  char* at = static_cast<char*>(*ws) + packed_bytes;  // the packed slots lie below the headers (bit_slot)
  b.headers = reinterpret_cast<int4*>(at);
  b.list = reinterpret_cast<int*>(at + header_bytes + tiles * 4);  // after the tile lines (bit_tile_lines)
  b.classes = reinterpret_cast<uint8_t*>(at + header_bytes + tiles * 4 + entries * 4);
  params->blocks.headers = b.headers;
  params->blocks.list = b.list;
  Status st = build_bit_lists(b, stream);
  if (!st.ok()) (void)cuda_backend::stream_free(*ws, stream);
  return st;
}

// The bias kernels' FwdBias: ALiBi's slopes (the term computed, FwdBias::alibi), or the stored bias's layout and
// its paths. FASTATTN_BIAS_STAGED=0: the per-thread global loads; FASTATTN_BIAS_PLAIN=0: every block on the
// generic body (cuda/env_switch.h).
inline FwdBias fwd_bias_params(const detail::Problem& pr, bool can_stage) {
  const bool plain = cuda_backend::env_switch("FASTATTN_BIAS_PLAIN", true);
  if (pr.alibi.defined()) {
    FwdBias a{pr.alibi.data, pr.alibi.batch_stride, 0, 0, 1, false};
    a.plain = plain;
    a.alibi = true;
    return a;
  }
  const detail::BiasView& b = pr.bias;
  const bool even = b.batch_stride % 2 == 0 && b.head_stride % 2 == 0 && (b.rows <= 1 || b.row_stride % 2 == 0);
  FwdBias f{b.data, b.batch_stride, b.head_stride, b.row_stride, b.head_div,
            even && reinterpret_cast<uintptr_t>(b.data) % 4 == 0};
  const bool by8 = b.batch_stride % 8 == 0 && b.head_stride % 8 == 0 && (b.rows <= 1 || b.row_stride % 8 == 0);
  // (the staged copies address a tile's rows by 32-bit element offsets: fwd/mainloop.cuh, bias_tile_rows)
  const bool rows32 = b.rows <= 1 || (b.rows - 1) * std::abs(b.row_stride) < (int64_t(1) << 31);
  f.staged = can_stage && by8 && rows32 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0 &&
             cuda_backend::env_switch("FASTATTN_BIAS_STAGED", true);
  f.plain = plain;
  return f;
}

// `splits`: split-KV configs only (SplitConfig): the key splits per tile, > 1; `base`: their base
// tile space as the split plan has it (plan_splits), not planned again.
template <class T, class Cfg>
Status launch_cfg(const cuda_backend::LaunchProblem& lp, cudaStream_t stream, int splits = 1,
                  const cuda_backend::TileSpace* base = nullptr) {
  using cuda_backend::Role;
  using cuda_backend::tma_tensor;
  constexpr int D = Cfg::kHeadDim;
  const detail::Problem& pr = *lp.problem;
  CUtensorMap tq, tk, tv, to;
  // GQA packing (sched/gqa_pack.h): the Q box is R rows x 128 / R heads from the tile's first head,
  // landing as rows g * R + i of the 128-row buffer in the same 128-byte-swizzled row layout (the
  // swizzle follows the smem row), and as many bytes as the unpacked box (the producer's expect_tx).
  if (Cfg::kBlockM != cuda_backend::kPackTileRows && lp.pack.rows > 0)
    return Status::Unsupported("internal: GQA packing needs 128-row tiles");  // launch_fwd routes it
  const int q_box_rows = lp.pack.rows > 0 ? lp.pack.rows : Cfg::kBlockM;
  Status st = cuda_backend::make_tma_map(tma_tensor(pr, Role::Q), q_box_rows, &tq, Cfg::kBlockM / q_box_rows);
  // A paged cache's K/V boxes hold the keys of one page piece (KvCacheParams::box_rows).
  cuda_backend::KvCacheParams kv = lp.kv;
  if (kv.page_table != nullptr) kv.box_rows = std::gcd(int(kv.page_size.d), Cfg::kBlockN);
  const int kv_box_rows = kv.page_table != nullptr ? kv.box_rows : Cfg::kBlockN;
  if constexpr (Cfg::kPageHalves) {  // one box a page half, every atom (launch_split.cuh picks it)
    if (kv.page_table == nullptr || kv.box_rows != Cfg::kBlockN / 2 || pr.head_dim_v != Cfg::kHeadDimV)
      return Status::Unsupported("internal: the key-half forward takes paged caches of page half a block");
    if (st.ok()) st = cuda_backend::make_tma_map_by_atom(tma_tensor(pr, Role::K), kv_box_rows, &tk);
    if (st.ok()) st = cuda_backend::make_tma_map_by_atom(tma_tensor(pr, Role::V), kv_box_rows, &tv);
  } else {
    if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::K), kv_box_rows, &tk);
    if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::V), kv_box_rows, &tv);
  }
  if (!st.ok()) return st;
  // O goes out by TMA (64-row boxes, one per consumer warpgroup) where the kernel can stage it in
  // a spare Q buffer and TMA can address it: fixed-length (TMA cannot stop at a varlen sequence's
  // end) with 16-byte-aligned base and strides; else by plain stores from registers. Not at d = 64,
  // where the register stores measured 2-3% faster (docs/notes/fwd-sm90.md). Not under GQA
  // packing: a warpgroup's 64 rows are then several heads' rows (register stores, which drop the
  // padding rows).
  const cuda_backend::TmaTensor out = tma_tensor(pr, Role::Out);
  FwdParams params;
  params.attn = lp.attn;
  if constexpr (Cfg::kBias) params.bias = fwd_bias_params(pr, Cfg::kBiasStaged);
  params.kv = kv;
  params.store.out_vec16 = cuda_backend::aligned16(out) ? 1 : 0;
  params.store.out_tma = !Cfg::kSplit && Cfg::kQBuffers == 2 && D > 64 && lp.pack.rows == 0 && cuda_backend::tma_storable(out) &&
                         cuda_backend::make_tma_map(out, 64, &to).ok();
  if (!params.store.out_tma) to = tq;  // unused
  // The schedule, once the config is known: its tile rows, and a TMA store box cannot start above
  // row 0 (TileSchedule::first_block_pad).
  cuda_backend::ScheduleShape shape;
  shape.tile_rows = Cfg::kBlockM;
  shape.pad_first_ok = !params.store.out_tma && !Cfg::kBlockList;  // block lists: a tile's rows in one mask block
  shape.kv_bytes_per_slot = int64_t(lp.attn.seqlen_k) * (pr.head_dim + pr.head_dim_v) * int64_t(sizeof(T));
  shape.planned = base;
  int ctas = 0;
  st = cuda_backend::plan_schedule(lp, shape, &params.sched, &ctas);
  if (!st.ok()) return st;
  if constexpr (Cfg::kSplit) {  // each of the schedule's tiles becomes `splits` tiles, split innermost
    const int64_t tiles = int64_t(params.sched.tiles) * splits;
    if (tiles > INT32_MAX) return Status::Unsupported("num_splits: more than 2^31 tiles x splits");
    params.split.tiles = int(tiles);
    params.split.splits = cuda_backend::FastDiv(unsigned(splits));
    if (tiles > 0) st = cuda_backend::persistent_grid(int(tiles), &ctas);
    if (!st.ok()) return st;
  }
  auto kernel = fwd_kernel<T, Cfg>;
  const int smem = fwd_smem_bytes<Cfg>();
  static_assert(fwd_smem_bytes<Cfg>() <= 227 * 1024, "the forward's shared memory exceeds sm_90's 227 KB");
  static cuda_backend::PerDeviceFlags attr_set;  // per instantiation
  if (st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set); !st.ok())
    return st;
  if (params.sched.tiles == 0) return Status::Ok();
  // One CTA per split tile in clusters of `splits`: no workspace, no combine (cluster_merge.cuh).
  if constexpr (Cfg::kClusterMerge)
    return launch_in_clusters<Cfg>(kernel, params.split.tiles, splits, smem, stream, tq, tk, tv, to, params);
  cuda_backend::SplitBuffers parts;
  if constexpr (Cfg::kSplit) {
    st = cuda_backend::split_buffers(lp, splits, stream, &parts);
    if (!st.ok()) return st;
    params.split.o_part = parts.o;
    params.split.lse_part = parts.lse;
    params.split.rows = parts.rows;
    params.split.rows_per_head = parts.rows_per_head;
  }
  void* lists = nullptr;  // block-sparse: the tiles' block lists (sm90/fwd/block_lists.h)
  if constexpr (Cfg::kBitmask) {
    st = prepare_bit_lists(lp, stream, &params, &lists);
    if (!st.ok()) return st;
  } else if constexpr (Cfg::kBlockList) {
    st = prepare_block_lists(lp, stream, &params, &lists);
    if (!st.ok()) return st;
  }
  // Persistent: one CTA per SM (smem allows no second), each walks its share of the tiles.
  kernel<<<ctas, Cfg::kThreads, smem, stream>>>(tq, tk, tv, to, params);
  cudaError_t e = cudaGetLastError();
  if constexpr (Cfg::kBlockList) {
    if (cudaError_t f = cuda_backend::stream_free(lists, stream); f != cudaSuccess && e == cudaSuccess) e = f;
  }
  if constexpr (Cfg::kSplit) {
    st = cuda_backend::split_finish(lp, splits, parts, e == cudaSuccess, stream);
    if (e == cudaSuccess && !st.ok()) return st;
  }
  if (e != cudaSuccess) return {Code::CudaError, std::string("forward launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

// Alternative configs per problem, each chosen by measurement (docs/notes/fwd-sm90.md); they
// fit the tile to d = 64's softmax load, to short keys or to narrow windows.
// - d = 128 (any s_k, masked or not): the default 2-stage block stream with two Q buffers. The
//   deferred max (OnlineSoftmax::step_deferred) fits only 128-key tiles, and with it the block
//   stream beats a 176-key tile at s_k 8k-16k by 7%; a 3-stage ring with one Q buffer lost to it.
// - d = 128, narrow local window (MaskClass::NarrowLocal): 64 keys, two Q buffers and a 4-stage
//   ring: an m-block sees 3 blocks of 64 (192 keys) instead of 2 of 128, and the producer runs
//   further ahead (window (64, 0) s 1k 1.11x; wider windows lose).
// - d = 64, unpacked: three consumer warpgroups, 192 x 128 tiles, 3-stage ring (full s 8k
//   1.11x over two warpgroups). Not for causal/local with s_k <= 1024 (a 192-row diagonal wastes
//   more of its tile than a 128-row one), which keep 128 x 128 with 3 stages.
// - d = 64, GQA-packed (128-row tiles only): 128 keys, 3 stages for s_k <= 1024; longer keys keep
//   192.
constexpr int kShortMaxKeys64 = 1024;

// The config of a (d, d_v) with no per-problem alternative: the head dim's default one, or at d_qk 192
// with d_v 128 FA3's 128 x 128 tile, whose S, P and O registers are d 128's. One Q buffer there (Q 48 KB
// + the K / V ring 2 x (48 + 32) KB = 208 KB; a second Q buffer would need 256 KB), and no ping-pong
// (d > 128: FA3 turns its scheduler barrier off above d 128 too). 96 keys with two Q buffers measured
// slower (docs/notes/fwd-sm90.md, session 33).
template <int D, int DV>
struct DefaultConfig {
  static_assert(DV == D, "d_v != d: the menu's 192 / 128 only (its specialization below)");
  using type = FwdConfig<D>;
};
template <>
struct DefaultConfig<192, 128> {
  using type = VHeadDim<FwdConfig<192, 128>, 128>;
};

// The split-KV kernel's base config per head dim (launch_split.cuh): the default one, but at d = 64
// the short-row 128-key one: the partial store spilled 48 bytes on the default 192-key tile.
template <int D, int DV>
struct SplitBase : DefaultConfig<D, DV> {};
template <>
struct SplitBase<64, 64> {
  using type = FwdConfig<64, 128, 3>;
};

template <class T, int D, int DV>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  using cuda_backend::MaskClass;
  if (lp.num_splits != 1) {  // split-KV: as asked, or where the heuristic finds idle SMs
    using Split = typename SplitBase<D, DV>::type;
    int sms = 0;
    if (Status st = cuda_backend::sm_count(&sms); !st.ok()) return st;
    // The streaming rule's per-CTA rate was measured at d 128 (split_heuristic.cpp): other dims keep half the SMs.
    double hbm = 0;
    if (D == 128) {
      if (Status st = cuda_backend::hbm_bytes_per_s(&hbm); !st.ok()) return st;
    }
    const cuda_backend::SplitPlan plan =
        cuda_backend::plan_splits(lp.num_splits, lp.attn, lp.mask, lp.pack, Split::kBlockM, Split::kBlockN, sms, hbm);
    if (plan.splits > 1) return launch_fwd_split<T, D, DV>(lp, plan, stream);
  }
  if constexpr (D == 64 && DV == 64) {
    const bool short_keys = lp.attn.seqlen_k <= kShortMaxKeys64;
    const bool masked = lp.mask != MaskClass::None;
    if (lp.pack.rows == 0 && !(short_keys && masked)) return launch_cfg<T, FwdConfig<64, 128, 3, 3>>(lp, stream);
    if (short_keys) return launch_cfg<T, FwdConfig<64, 128, 3>>(lp, stream);
  }
  if constexpr (D == 128 && DV == 128) {
    if (lp.mask == MaskClass::NarrowLocal) return launch_cfg<T, FwdConfig<128, 64, 4>>(lp, stream);
  }
  return launch_cfg<T, typename DefaultConfig<D, DV>::type>(lp, stream);
}

}  // namespace fastattn::sm90
