// The backward's per-sequence view: offsets and lengths (as SeqInfo), and where a sequence's rows
// start in the padded per-row workspace (BwdParams::padded_rows).
#pragma once

#include "cuda/common/bwd_params.h"
#include "cuda/common/seqlen.cuh"

namespace fastattn::cuda_backend {

struct BwdSeq : SeqInfo {
  int rows_k;     // key tokens present (dk/dv rows written; those >= len_k get 0)
  int padded_q;   // first row of this sequence in the workspace, a multiple of 64
};

// FA3's padding: sequence b starts at ((cu_q[b] + 64 b) / 64) * 64, which leaves each sequence at
// least its rows rounded up to 64 before the next one, and needs total_q + 64 batch rows in all.
__host__ __device__ __forceinline__ int64_t padded_q_offset(int64_t q_offset, int b, bool varlen, int seqlen_q) {
  return varlen ? (q_offset + 64 * int64_t(b)) / 64 * 64 : int64_t(b) * ((seqlen_q + 63) / 64 * 64);
}

__device__ __forceinline__ BwdSeq bwd_seq(const BwdParams& p, int b) {
  BwdSeq s;
  const bool varlen = p.cu_seqlens_q != nullptr;
  if (varlen) {
    s.q_offset = p.cu_seqlens_q[b];
    s.k_offset = p.cu_seqlens_k[b];
    s.rows_q = p.cu_seqlens_q[b + 1] - s.q_offset;
    s.rows_k = p.cu_seqlens_k[b + 1] - s.k_offset;
    s.batch_coord = 0;
  } else {
    s.q_offset = s.k_offset = 0;
    s.rows_q = p.seqlen_q;
    s.rows_k = p.seqlen_k;
    s.batch_coord = b;
  }
  s.len_q = p.seqused_q != nullptr ? min(p.seqused_q[b], s.rows_q) : s.rows_q;
  s.len_k = p.seqused_k != nullptr ? min(p.seqused_k[b], s.rows_k) : s.rows_k;
  s.padded_q = int(padded_q_offset(s.q_offset, b, varlen, p.seqlen_q));
  return s;
}

}  // namespace fastattn::cuda_backend
