// Everything the backward kernels need at run time: the problem every family shares (AttnParams:
// out, lse, sizes, varlen arrays, scale, softcap, window), and the backward's own fields (dO, the
// gradients, the workspace, the block counts, deterministic mode). Plain data, shared by the host
// launch and the kernels (one __grid_constant__ argument).
#pragma once

#include <cstdint>

#include "cuda/common/attn_params.h"
#include "cuda/common/bwd_bias_params.h"

namespace fastattn::cuda_backend {

struct BwdParams {
  AttnParams attn;  // out and lse: the forward's outputs, read by the preprocess

  // dO, read by the preprocess and the kernel (through TMA); gradients written by the kernels.
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t dout_stride_b = 0, dout_stride_s = 0, dout_stride_h = 0;
  int64_t dq_stride_b = 0, dq_stride_s = 0, dq_stride_h = 0;
  int64_t dk_stride_b = 0, dk_stride_s = 0, dk_stride_h = 0;
  int64_t dv_stride_b = 0, dv_stride_s = 0, dv_stride_h = 0;

  // Workspace (bwd_workspace in the launch), per q head over `padded_rows` rows: every sequence's
  // rows start at a multiple of the config's q-block size (64; 128 at d 64, 80 at d 128 unmasked: bwd_block_m,
  // padded_q_offset), so a q-block's scalars and dQ accumulator are each one contiguous run.
  float* dq_accum = nullptr;   // [h_q][padded_rows][d] fp32, each q-block's run in fragment order (dq_layout.h)
  float* lse_log2 = nullptr;   // [h_q][padded_rows]: lse * log2(e); +inf where no key is kept
  float* dpsum = nullptr;      // [h_q][padded_rows]: D = rowsum(dO * O); 0 past the used rows
  int* dq_sem = nullptr;       // deterministic: [b][h_q][m_blocks] count of dQ adds done
  int* tile_ticket = nullptr;  // deterministic and the dQ ring: CTA start order
  int64_t padded_rows = 0;

  int block_m = 0;           // rows per q-block (sm90/bwd/config.h, bwd_block_m): picks the launch's config
  int m_blocks = 0;          // q-blocks (of block_m rows) per sequence (at attn.seqlen_q)
  int n_blocks = 0;          // key blocks per sequence (at attn.seqlen_k; launch_bwd: of the config's kBlockN)
  float scale = 0.f;         // softmax scale (dK at the end, dQ in the postprocess)
  float tanh_of_log2 = 0.f;  // 1 / (softcap * scale_log2): tanh from a capped score in log2 units
  int deterministic = 0;
  // Deterministic mode's CTA order: key blocks in chunks of det_chunk per (sequence, KV head), all
  // heads' chunk c before chunk c + 1, from the last key block down (sm90/bwd/tile.cuh: the higher
  // key blocks add first). A q-block's adds are chained through the key blocks, so the
  // key blocks of a head running at once (the chain a wave waits along) are only det_chunk, while
  // det_chunk x heads resident CTAs still share their heads' Q and dO in L2.
  int det_chunk = 0;
  // Default mode under a right-bounded mask (causal, windows with a right edge), d 128, d 64 from 16
  // key blocks and the 80-key d 256 tile: the CTA order is longest first, units (sequence x KV head)
  // in sections of lpt_section (sm90/bwd/lpt_order.h: bwd_longest_first); 0: block-index order.
  int lpt_section = 0;
  // Default mode under a right-bounded mask, d 128 and d 64 in the longest-first order: each CTA
  // walks its steps downwards, the group's q heads inner (sm90/bwd/lpt_order.h, bwd_walk_next); 0:
  // heads outer, q-blocks upwards.
  int q_walk_down = 0;
  // Default mode under a causal-like mask (right edge, no left edge), d 128, where lpt_section is 1:
  // each CTA works on key blocks j and N - 1 - j of its sequence (sm90/bwd/lpt_order.h,
  // bwd_pair_blocks; the items are unit x ceil(n_blocks / 2) + j), the second walked upwards.
  int kv_pair = 0;

  // (Last, so that the other paths' kernels see their fields where they were.)
  // The default mode's dQ ring (sm90/bwd/dq_ring.h; then no dq_accum and no postprocess): slots of
  // block_m x d fp32 in fragment order, q-block position P in slot P & (dq_ring_slots - 1) (a power of
  // two; the workspace holds min(slots, positions) of them); per position
  // the key blocks that add into it (need) and the adds landed so far (count; need + 1 once its slot
  // is free again). ring_section: the longest-first section width that the positions follow.
  float* dq_ring = nullptr;
  int* dq_ring_need = nullptr;
  int* dq_ring_count = nullptr;
  int dq_ring_slots = 0;  // 0: the accumulator path
  int ring_section = 0;

  // The recompute band (sm90/bwd/band.h, band_kernel.cuh; then no dq_accum, no ring, no postprocess):
  // band_blocks key blocks a CTA (0: not this path), band_count bands a sequence (of n_blocks), and
  // the GQA slots that hold partial dQ beyond the kernel's two smem buffers: per CTA
  // bwd_band_spill_slots(q_per_kv) runs of block_m x d fp32 (nullptr where there are none).
  int band_blocks = 0;
  int band_count = 0;
  float* band_spill = nullptr;

  // Block-sparse kernels (BwdConfig::kBlockList; sm90/bwd/block_lists.h): per key tile (batch, KV head,
  // key block) its BlockList header (four ints: an int4), positions into q_lists (kept q-blocks of a mask
  // column, ascending).
  const int* q_list_headers = nullptr;
  const int* q_lists = nullptr;

  // The additive bias and dbias (BiasBwdConfig's kernels; appended, so that every other kernel reads its
  // fields where it did).
  BwdBias bias;

  // The full mask's wave tail (sm90/bwd/wave_tail.h; appended likewise): items from tail_from on are
  // tail_pieces pieces a tile (0: no split); tail_runs holds each piece's dK / dV partial (fp32, dK and dV of
  // the tile's keys per run, in the consumers' register order), tail_count the pieces finished per split tile (cleared by
  // the preprocess).
  int tail_from = 0;
  int tail_pieces = 0;
  float* tail_runs = nullptr;
  int* tail_count = nullptr;
};

}  // namespace fastattn::cuda_backend
