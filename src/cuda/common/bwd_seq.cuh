// The backward's per-sequence view: SeqInfo, and where a sequence's rows start in the padded
// per-row workspace (BwdParams::padded_rows).
#pragma once

#include "cuda/common/bwd_params.h"
#include "cuda/common/seqlen.cuh"

namespace fastattn::cuda_backend {

// FA3's padding: sequence b starts at ((cu_q[b] + R b) / R) * R for the q-block size R (64, or
// 128 where the backward's config says so), which leaves each sequence at least its rows rounded up
// to R before the next one, and needs total_q + R batch rows in all.
__host__ __device__ __forceinline__ int64_t padded_q_offset(int64_t q_offset, int b, bool varlen, int seqlen_q,
                                                            int rows = 64) {
  return varlen ? (q_offset + rows * int64_t(b)) / rows * rows : int64_t(b) * ((seqlen_q + rows - 1) / rows * rows);
}

struct BwdSeq : SeqInfo {
  int padded_q;  // first row of this sequence in the workspace, a multiple of the q-block size

  BwdSeq() = default;
  // block_m: the config's q-block size (a compile-time constant at every call).
  __device__ __forceinline__ BwdSeq(const BwdParams& p, int b, int block_m) : SeqInfo(p.attn, b) {
    padded_q = int(padded_q_offset(q_offset, b, p.attn.cu_seqlens_q != nullptr, p.attn.seqlen_q, block_m));
  }
};

}  // namespace fastattn::cuda_backend
