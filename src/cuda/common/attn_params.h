// The problem as every attention kernel family sees it at run time (forward, backward, any arch):
// output and LSE pointers with their strides in elements, sizes, the varlen index arrays, the
// scale and softcap, the window. Plain data, filled once per call from the resolved
// detail::Problem (cuda/launch_plan.h). Q, K, V reach the kernels as TMA maps.
// Field order is the kernels' parameter-bank layout: keep it.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

struct AttnParams {
  void* out = nullptr;
  float* lse = nullptr;  // may be null: not written
  int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;
  int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int q_per_kv = 1;     // GQA ratio h_q / h_kv
  int seqlen_q = 0;     // fixed-length sizes, or the max seqlens when varlen
  int seqlen_k = 0;
  const int32_t* cu_seqlens_q = nullptr;  // varlen when non-null (device pointers)
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;

  float scale_log2 = 0.f;     // softmax scale * log2(e), or log2(e) when softcap is on
  float softcap_in = 0.f;     // scale / softcap: tanh argument multiplier (softcap on)
  float softcap = 0.f;        // 0 = off
  int window_left = -1;       // -1 = unbounded; causal arrives folded in as window_right = 0
  int window_right = -1;
};

}  // namespace fastattn::cuda_backend
