// The backward's per-sequence view: SeqInfo, and where a sequence's rows start in the padded
// per-row workspace (BwdParams::padded_rows).
#pragma once

#include "cuda/common/bwd_params.h"
#include "cuda/common/seqlen.cuh"

namespace fastattn::cuda_backend {

// FA3's padding: sequence b starts at ((cu_q[b] + 64 b) / 64) * 64, which leaves each sequence at
// least its rows rounded up to 64 before the next one, and needs total_q + 64 batch rows in all.
__host__ __device__ __forceinline__ int64_t padded_q_offset(int64_t q_offset, int b, bool varlen, int seqlen_q) {
  return varlen ? (q_offset + 64 * int64_t(b)) / 64 * 64 : int64_t(b) * ((seqlen_q + 63) / 64 * 64);
}

struct BwdSeq : SeqInfo {
  int padded_q;  // first row of this sequence in the workspace, a multiple of 64

  BwdSeq() = default;
  __device__ __forceinline__ BwdSeq(const BwdParams& p, int b) : SeqInfo(p.attn, b) {
    padded_q = int(padded_q_offset(q_offset, b, p.attn.cu_seqlens_q != nullptr, p.attn.seqlen_q));
  }
};

}  // namespace fastattn::cuda_backend
