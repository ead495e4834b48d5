// Host launch of the Hopper forward for one (dtype, head dim): tensor maps, smem size, grid.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/common/fwd_params.h"
#include "cuda/sm90/fwd_kernel.cuh"
#include "cuda/sm90/fwd_api.h"
#include "cuda/causal_sections.h"
#include "cuda/device_info.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/tma_map.h"

namespace fastattn::sm90 {

template <class T, class Cfg>
Status launch_cfg(const AttnArgs& args, const cuda_backend::FwdParams& p, cudaStream_t stream) {
  constexpr int D = Cfg::kHeadDim;
  CUtensorMap tq, tk, tv, to;
  // GQA packing (sched/gqa_pack.h): the Q box is R rows x 128 / R heads from the tile's first head,
  // landing as rows g * R + i of the 128-row buffer in the same 128-byte-swizzled row layout (the
  // swizzle follows the smem row), and as many bytes as the unpacked box (the producer's expect_tx).
  if (Cfg::kBlockM != cuda_backend::kTileRows && p.pack_rows > 0)
    return Status::Unsupported("internal: GQA packing needs 128-row tiles");  // launch_fwd routes it
  const int q_box_rows = p.pack_rows > 0 ? p.pack_rows : Cfg::kBlockM;
  Status st = cuda_backend::make_tma_map(args.q, q_box_rows, &tq, Cfg::kBlockM / q_box_rows);
  if (st.ok()) st = cuda_backend::make_tma_map(args.k, Cfg::kBlockN, &tk);
  if (st.ok()) st = cuda_backend::make_tma_map(args.v, Cfg::kBlockN, &tv);
  if (!st.ok()) return st;
  // O goes out by TMA (64-row boxes, one per consumer warpgroup) where the kernel can stage it in
  // a spare Q buffer and TMA can address it: fixed-length (TMA cannot stop at a varlen sequence's
  // end) with 16-byte-aligned base and strides; else by plain stores from registers. Not at d = 64:
  // there the register stores measured 2-3% faster (H100 A/B, 2026-11-21: s1k and s8k full), while
  // d = 128 gained 4-8% from TMA (s = 1k, GQA). Not under GQA packing: a warpgroup's 64 rows are
  // then several heads' rows (register stores, which drop the padding rows).
  cuda_backend::FwdParams params = p;
  // The host's tile space counts 128-row m-blocks; a 192-row config (three consumer warpgroups)
  // has fewer tiles than the host's tile check bounded.
  if (Cfg::kBlockM != cuda_backend::kTileRows)
    params.tiles = int(cuda_backend::set_tile_space(params, args.cu_seqlens_q.defined(), Cfg::kBlockM));
  params.out_tma = Cfg::kQBuffers == 2 && D > 64 && p.pack_rows == 0 && cuda_backend::tma_storable(args.out) &&
                   cuda_backend::make_tma_map(args.out, 64, &to).ok();
  if (!params.out_tma) to = tq;  // unused
  if (params.out_tma) {  // a TMA store box cannot start above row 0 (FwdParams::first_block_pad)
    params.first_block_pad = 0;
    if (params.window_right < 0) params.heavy_first = 0;  // unmasked: the light tile would come first
  }
  auto kernel = fwd_kernel<T, Cfg>;
  const int smem = int(sizeof(FwdSmem<Cfg>)) + 1024;  // + slack to align the base to 1024
  static bool attr_set = false;  // per instantiation; racing first calls set the same value
  if (!attr_set) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return {Code::CudaError, std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e)};
    attr_set = true;
  }
  if (params.tiles == 0) return Status::Ok();
  // Persistent: one CTA per SM (smem allows no second), each walks its share of the tiles.
  int ctas = 0;
  st = cuda_backend::persistent_grid(params.tiles, &ctas);
  if (!st.ok()) return st;
  const int64_t kv_bytes_per_slot = int64_t(p.seqlen_k) * (args.k.shape[args.k.ndim - 1] + args.v.shape[args.v.ndim - 1]) *
                                    int64_t(sizeof(T));
  st = cuda_backend::set_section_slots(params, ctas, Cfg::kBlockM, kv_bytes_per_slot);
  if (!st.ok()) return st;
  params.div = cuda_backend::tile_divisors(params);  // the tile space and section width are final
  kernel<<<ctas, Cfg::kThreads, smem, stream>>>(tq, tk, tv, to, params);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {Code::CudaError, std::string("forward launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

// Alternative configs per problem, each chosen by an H100 A/B (2026-11-21, docs/notes/fwd-sm90.md,
// passes 13-14; numbers are the default config's time over the alternative's). The alternatives
// fit the tile to d = 64's softmax load, to short keys or to narrow windows.
// - d = 128, no causal/local mask, s_k >= 8192: 128 x 176 (FA3's choice there) ran these until
//   session 20 (s_k 16k 1.05-1.07 and 8k 1.04 over the block stream then). The deferred max
//   (OnlineSoftmax::step_deferred) fits only 128-key tiles, and with it the block stream runs
//   s 8k and 16k 1.073-1.075 x the 176-key tile (H100 A/B 2026-11-25,
//   bench/results/2026-11-25-ab-session20.md): the 176-key tile is gone.
// - d = 128 (any s_k, masked or not): the default 2-stage block stream. A 3-stage ring (one Q
//   buffer) ran 4096 <= s_k < 8192 and causal until pass 22; with the plain loop body (pass 22)
//   the 2-stage stream won back: causal s 4k 1.033, 8k 1.013, 16k 1.006; unmasked s 4k 1.003 and
//   GQA 1.09 (H100 A/B 2026-11-22, session 10; bench/results/2026-11-22-ab-session10-pass22.md).
// - d = 128, narrow local window (left + right <= 64, both bounded): 64 keys, two Q buffers and a
//   4-stage ring: an m-block sees 3 blocks of 64 (192 keys) instead of 2 of 128, and the producer
//   runs further ahead: window (64, 0) s 8k 1.06, s 1k 1.11; wider windows lose ((256, 0) and
//   (128, 128): 0.91).
// - d = 64, unpacked: three consumer warpgroups, 192 x 128 tiles, 3-stage ring (pass 16, H100
//   and H200 A/B 2026-11-22 against the two-warpgroup configs): full s 1k 1.06-1.09, 4k 1.08,
//   8k 1.11-1.12, 16k 1.07-1.13; causal 4k 1.02-1.04, 8k 1.04-1.05; window (64, 0) 1.06-1.10.
//   Not for causal/local with s_k <= 1024 (causal s 1k 0.87-0.90: a 192-row diagonal wastes more
//   of its tile than a 128-row one), which keep 128 x 128 with 3 stages (against 192 keys, whose
//   last block is a third empty at s_k = 1024: 1.08). 3 stages beat 2 by 0-4% except s 16k (-1.5%).
// - d = 64, GQA-packed (128-row tiles only): 128 keys, 3 stages for s_k <= 1024; longer keys keep
//   192 (decode b8 h32/8 s_k 8k: 128 keys 0.92, b16 s_k 16k 0.98).
constexpr int kShortMaxKeys64 = 1024;
constexpr int kNarrowWindow128 = 64;
inline bool unmasked(const cuda_backend::FwdParams& p) { return p.window_left < 0 && p.window_right < 0; }
inline bool narrow_window(const cuda_backend::FwdParams& p) {
  return p.window_left >= 0 && p.window_right >= 0 && p.window_left + p.window_right <= kNarrowWindow128;
}

template <class T, int D>
Status launch_fwd(const AttnArgs& args, const cuda_backend::FwdParams& p, cudaStream_t stream) {
  if constexpr (D == 64) {
    const bool short_keys = p.seqlen_k <= kShortMaxKeys64;
    if (p.pack_rows == 0 && !(short_keys && !unmasked(p))) return launch_cfg<T, FwdConfig<64, 128, 3, 3>>(args, p, stream);
    if (short_keys) return launch_cfg<T, FwdConfig<64, 128, 3>>(args, p, stream);
  }
  if constexpr (D == 128) {
    if (narrow_window(p)) return launch_cfg<T, FwdConfig<128, 64, 4>>(args, p, stream);
  }
  return launch_cfg<T, FwdConfig<D>>(args, p, stream);
}

}  // namespace fastattn::sm90
