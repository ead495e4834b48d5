// The additive attention bias as the Hopper backward reads it (AttnArgs::bias) and its gradient
// (AttnArgs::dbias). Plain data inside BwdParams, filled by the host (bwd_backend.cu) and read only by
// the bias kernels (sm90/bwd/bias.cuh, BiasBwdConfig); the dense kernels never touch these fields.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

// How the bias elements are stored: the kernel reads 4-byte words (F32) or 2-byte halves (BF16 / F16)
// and widens them itself, so that one kernel serves the three dtypes.
enum BwdBiasKind : int { kBiasF32 = 0, kBiasBF16 = 1, kBiasF16 = 2 };

struct BwdBias {
  // Element (b, h, i, j) of query head h at data + b * stride_b + (h / head_div) * stride_h + i * stride_r + j,
  // i and j counted from the sequence's start (varlen too). stride_b is 0 where the batch shares the bias.
  const void* data = nullptr;  // null: no bias (then the call runs the dense kernels)
  int64_t stride_b = 0, stride_h = 0, stride_r = 0;
  int head_div = 1;  // heads_q / bias heads: q heads that share a bias head
  int kind = kBiasF32;
  // The CTA order walks the batch innermost (sm90/bwd/bias.cuh, bwd_bias_batch_inner_item): set by the launch
  // for a batch-shared bias in block-index order (no longest-first sections, no paired key blocks).
  int batch_inner = 0;
  // BF16 / F16 bias read two keys a 4-byte load (base 4-byte aligned, strides even), else element by element.
  int pairs = 0;
  float inv_scale = 1.f;  // 1 / softmax scale: the bias seeds S^T's accumulator in units of the unscaled score
  // dbias (fp32, cleared by the host before the kernel), the same addressing with its own strides: every
  // (batch, q head) adds into the entry it read, so the broadcast dims sum. Null: not asked for.
  float* grad = nullptr;
  int64_t grad_stride_b = 0, grad_stride_h = 0, grad_stride_r = 0;
};

}  // namespace fastattn::cuda_backend
