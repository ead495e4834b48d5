// The additive attention bias as the Hopper backward reads it (AttnArgs::bias) and its gradient
// (AttnArgs::dbias). Plain data inside BwdParams, filled by the host (bwd_backend.cu) and read only by
// the bias kernels (sm90/bwd/bias.cuh, BiasBwdConfig); the dense kernels never touch these fields.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fastattn::cuda_backend {

// How the bias elements are stored: the kernel reads 4-byte words (F32) or 2-byte halves (BF16 / F16)
// and widens them itself, so that one kernel serves the three dtypes.
// kBiasAlibi: no stored bias but ALiBi's -slope |q + len_k - len_q - key|, computed (the F32 kernel's seed): data
// holds the fp32 slopes with stride_b their batch stride, stride_h 1, stride_r 0 and head_div 1, so that a spot's
// element offset less its key is the slope's index (bias.cuh, bwd_bias_seed_f32).
enum BwdBiasKind : int { kBiasF32 = 0, kBiasBF16 = 1, kBiasF16 = 2, kBiasAlibi = 3 };

// BwdBias::lean. kBwdBiasGradPairs: dbias by 8-byte vector adds of key pairs (red.global.add.v2.f32) from 32-bit
// offsets, set where dbias's base is 8-byte aligned, its strides even and 64 rows of it span less than 2^31 elements.
// kBwdBiasStaged (BF16 / F16 bias, base 16-byte aligned, strides multiples of 8 elements, 64 rows within 2^31
// elements; FASTATTN_BIAS_BWD_STAGED=0 clears it alone): a warp's 64 q rows x 16 keys of the next step copied by
// cp.async into shared memory a step ahead and read by ldmatrix.trans straight into the seed's order (bias.cuh,
// bwd_bias_stage).
enum BwdBiasLean : int { kBwdBiasGradPairs = 2, kBwdBiasStaged = 4 };

struct BwdBias {
  // Element (b, h, i, j) of query head h at data + b * stride_b + (h / head_div) * stride_h + i * stride_r + j,
  // i and j counted from the sequence's start (varlen too). stride_b is 0 where the batch shares the bias.
  const void* data = nullptr;  // null: no bias (then the call runs the dense kernels)
  int64_t stride_b = 0, stride_h = 0, stride_r = 0;
  int head_div = 1;  // heads_q / bias heads: q heads that share a bias head
  int kind = kBiasF32;
  // The CTA order walks the batch innermost: set by the launch for a batch-shared bias in block-index order
  // (sm90/bwd/bias.cuh, bwd_bias_batch_inner_item) or in longest-first sections (lpt_order.h,
  // bwd_lpt_batch_inner_item; FASTATTN_BIAS_BWD_BATCH_INNER=0 keeps those batch outermost); not paired key blocks.
  int batch_inner = 0;
  // BF16 / F16 bias read two keys a 4-byte load (base 4-byte aligned, strides even), else element by element.
  int pairs = 0;
  float inv_scale = 1.f;  // 1 / softmax scale: the bias seeds S^T's accumulator in units of the unscaled score
  // kBwdBiasLean* bits (set per call by the host; FASTATTN_BIAS_BWD_LEAN=0 clears them for an A/B in one process).
  // Placed in the 4 bytes of padding before `grad`, so that BwdParams' layout, and the dense kernels, stay as they were.
  int lean = 0;
  // dbias (fp32, cleared by the host before the kernel), the same addressing with its own strides: every
  // (batch, q head) adds into the entry it read, so the broadcast dims sum. Null: not asked for.
  float* grad = nullptr;
  int64_t grad_stride_b = 0, grad_stride_h = 0, grad_stride_r = 0;
};

// `lean` sits in what was padding: the fields around it, and so every kernel's parameter offsets, are where they were.
static_assert(offsetof(BwdBias, grad) == 56 && sizeof(BwdBias) == 88, "BwdBias keeps its layout");

}  // namespace fastattn::cuda_backend
