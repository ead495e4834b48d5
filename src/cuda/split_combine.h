// Split-KV combine on the GPU: `splits` partial results per row (each split's output normalised by
// its own sum, and its LSE; -inf for a split that kept no key) merged into out and lse:
//   lse = log sum_s exp(lse_s),  out = sum_s exp(lse_s - lse) * o_s.
// Splits with lse_s = -inf carry no weight and their o_s is not read; a row no split kept a key
// for gets out = 0, lse = -inf. Host twin: src/cpu/split_combine.h. Host-only header.
#pragma once

#include <cstdint>

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

struct SplitCombineParams {
  int splits = 1;
  int dv = 0;
  // Rows in (b, h, i) order: row = (b * heads + h) * seqlen_q + i (varlen: batch 1, seqlen_q =
  // total_q, out_stride_b = 0).
  int batch = 0, heads = 0, seqlen_q = 0;
  // Varlen: cu_seqlens_q (device, varlen_batch + 1 entries). Tokens outside [cu[0], cu[varlen_batch])
  // belong to no sequence: the split kernel wrote no partial for them, so their out rows are left
  // as they are, as the unsplit kernel leaves them.
  const int32_t* cu_seqlens_q = nullptr;
  int varlen_batch = 0;
  const float* o = nullptr;    // (splits, rows, dv) fp32
  const float* lse = nullptr;  // (splits, rows) fp32
  void* out = nullptr;         // element (b, i, h, c) at b * stride_b + i * stride_s + h * stride_h + c
  DType out_dtype = DType::BF16;
  int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;
  float* lse_out = nullptr;    // optional: element (b, h, i) at b * stride_b + h * stride_h + i * stride_s
  int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 1;
  // Launched right after a split kernel that triggers its dependents early (sm_90's programmatic
  // dependent launch): the combine's blocks are scheduled while that kernel's last CTAs still run
  // and wait for its results on the device (griddepcontrol.wait), instead of the launch starting
  // only once it has ended.
  bool early_launch = false;
};

// Launches the combine on `stream` (a cudaStream_t; nullptr = default). No host sync.
Status combine_splits(const SplitCombineParams& p, void* stream);

}  // namespace fastattn::cuda_backend
