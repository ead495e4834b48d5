// Per-sequence offsets and lengths, for fixed-length and varlen (cu_seqlens, seqused) batches.
#pragma once

#include "cuda/common/attn_params.h"

namespace fastattn::cuda_backend {

struct SeqInfo {
  int q_offset, k_offset;  // first token of this sequence in the packed (or batch) layout
  int rows_q;              // tokens present for this sequence (rows >= len_q get out 0, lse -inf)
  int rows_k;              // keys present (the backward writes dK, dV rows up to it; 0 past len_k)
  int len_q, len_k;        // tokens used: the lengths the mask sees
  int batch_coord;         // TMA batch coordinate: b for fixed-length, 0 for varlen

  SeqInfo() = default;
  __device__ __forceinline__ SeqInfo(const AttnParams& p, int b) {
    if (p.cu_seqlens_q != nullptr) {
      q_offset = p.cu_seqlens_q[b];
      k_offset = p.cu_seqlens_k[b];
      len_q = p.cu_seqlens_q[b + 1] - q_offset;
      len_k = p.cu_seqlens_k[b + 1] - k_offset;
      batch_coord = 0;
    } else {
      q_offset = k_offset = 0;
      len_q = p.seqlen_q;
      len_k = p.seqlen_k;
      batch_coord = b;
    }
    rows_q = len_q;
    rows_k = len_k;
    if (p.seqused_q != nullptr) len_q = min(p.seqused_q[b], rows_q);
    if (p.seqused_k != nullptr) len_k = min(p.seqused_k[b], len_k);
  }
};

}  // namespace fastattn::cuda_backend
