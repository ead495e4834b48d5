// Everything the backward kernels need at run time (pointers, strides in elements, sizes, mask
// parameters, workspace). Plain data, shared by the host launch and the kernels.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

struct BwdParams {
  // Forward outputs and dO, read by the preprocess; gradients written by the kernels.
  const void* out = nullptr;
  const void* dout = nullptr;
  const float* lse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;
  int64_t dout_stride_b = 0, dout_stride_s = 0, dout_stride_h = 0;
  int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;
  int64_t dq_stride_b = 0, dq_stride_s = 0, dq_stride_h = 0;
  int64_t dk_stride_b = 0, dk_stride_s = 0, dk_stride_h = 0;
  int64_t dv_stride_b = 0, dv_stride_s = 0, dv_stride_h = 0;

  // Workspace (bwd_workspace in the launch), per q head over `padded_rows` rows: every sequence's
  // rows start at a multiple of 64 (padded_q_offset), so a 64-row q-block's scalars and dQ
  // accumulator are each one contiguous run.
  float* dq_accum = nullptr;   // [h_q][padded_rows][d] fp32, a q-block's 64 x d in fragment order
  float* lse_log2 = nullptr;   // [h_q][padded_rows]: lse * log2(e); +inf where no key is kept
  float* dpsum = nullptr;      // [h_q][padded_rows]: D = rowsum(dO * O); 0 past the used rows
  int* dq_sem = nullptr;       // deterministic: [b][h_q][m_blocks] count of dQ adds done
  int* tile_ticket = nullptr;  // deterministic: CTA start order
  int64_t padded_rows = 0;

  int batch = 0, heads_q = 0, heads_kv = 0, q_per_kv = 1;
  int seqlen_q = 0, seqlen_k = 0;  // fixed-length sizes, or the max seqlens when varlen
  int m_blocks = 0;                // 64-row q-blocks per sequence (at seqlen_q)
  int n_blocks = 0;                // key blocks per sequence (at seqlen_k)
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;

  float scale = 0.f;         // softmax scale (dK at the end, dQ in the postprocess)
  float scale_log2 = 0.f;    // scale * log2(e), or log2(e) when softcap is on
  float softcap_in = 0.f;    // scale / softcap
  float softcap = 0.f;       // 0 = off
  float tanh_of_log2 = 0.f;  // 1 / (softcap * scale_log2): tanh from a capped score in log2 units
  int window_left = -1, window_right = -1;  // causal is window_right = 0
  int deterministic = 0;
  // Deterministic mode's CTA order: key blocks in chunks of det_chunk per (sequence, KV head), all
  // heads' chunk c before chunk c + 1. A q-block's adds are chained through the key blocks, so the
  // key blocks of a head running at once (the chain a wave waits along) are only det_chunk, while
  // det_chunk x heads resident CTAs still share their heads' Q and dO in L2.
  int det_chunk = 0;
};

}  // namespace fastattn::cuda_backend
