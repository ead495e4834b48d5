// The additive-bias configurations the CPU backend is checked on, forward and backward (with dbias):
// bias dims broadcast or not (1, heads_kv, heads_q bias heads; batch or 1), fp32 / bf16 / fp16 bias,
// padded rows, head stride 0, extra rows and cols; -inf entries and a whole -inf row; odd lengths
// (1, 17, 113, 4097), s_q != s_k; with causal, windows, softcap, block-sparse and bitmask masks;
// varlen with empty sequences and seqused, GQA, fp16 / bf16 inputs, splits.
#pragma once

#include <vector>

#include "bit_mask_cases.h"
#include "block_mask_cases.h"
#include "cpu_cases.h"

namespace fastattn::testing {

inline BiasSpec bias(int heads = 1, bool per_batch = false, DType dt = DType::F32) {
  BiasSpec b;
  b.on = true;
  b.heads = heads;
  b.per_batch = per_batch;
  b.dtype = dt;
  b.grad = true;
  return b;
}
inline BiasSpec bias_laid(BiasSpec b, int layout) { b.layout = layout; return b; }
inline BiasSpec bias_extra(BiasSpec b, int rows, int cols) { b.extra_rows = rows; b.extra_cols = cols; return b; }
inline BiasSpec bias_holes(BiasSpec b, float neginf, int row = -1) { b.neginf = neginf; b.neginf_row = row; return b; }
inline BiasSpec bias_no_grad(BiasSpec b) { b.grad = false; return b; }
inline CaseSpec biased(CaseSpec s, BiasSpec b) { s.bias = b; return s; }

inline std::vector<NamedCase> bias_cases() {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  CaseSpec split = biased(causal(shape(1, 70, 200, 2, 1, 32, 32, F32)), bias(2));
  split.num_splits = 3;
  return {
      {"shared", biased(shape(2, 40, 50, 2, 1, 32, 32, F32), bias())},
      {"per_batch_heads_q", biased(shape(2, 40, 50, 4, 2, 32, 32, F32), bias(4, true)), 1},
      {"heads_kv", biased(shape(2, 65, 70, 4, 2, 32, 32, F32), bias(2, true))},
      {"gqa8_heads1_causal", biased(causal(shape(1, 70, 70, 8, 1, 32, 32, F32)), bias(1))},
      {"bf16_bias", biased(shape(1, 70, 90, 2, 2, 32, 32, F32), bias(2, false, BF16))},
      {"fp16_bias", biased(shape(1, 70, 90, 2, 2, 32, 32, F32), bias(1, false, F16))},
      {"row_padded", biased(shape(1, 70, 90, 2, 2, 32, 32, F32), bias_laid(bias(2), 1))},
      {"head_stride0", biased(shape(1, 50, 60, 4, 2, 32, 32, F32), bias_laid(bias(4, true), 2))},
      {"extra_rows_cols", biased(shape(1, 50, 60, 2, 2, 32, 32, F32), bias_extra(bias(), 7, 13))},
      {"neginf_holes", biased(shape(2, 40, 50, 2, 2, 32, 32, F32), bias_holes(bias(2, true), 0.3f))},
      {"neginf_row", biased(causal(shape(1, 40, 40, 2, 2, 32, 32, F32)), bias_holes(bias(), 0.0f, 17))},
      {"all_neginf", biased(shape(1, 20, 30, 2, 1, 32, 32, F32), bias_holes(bias(), 1.0f))},
      {"s1", biased(shape(2, 1, 1, 2, 2, 32, 32, F32), bias(1, true))},
      {"s17_causal", biased(causal(shape(1, 17, 17, 2, 2, 64, 64, F32)), bias(2))},
      {"sq113_sk17_causal", biased(causal(shape(1, 113, 17, 2, 2, 32, 32, F32)), bias())},
      {"sq17_sk113_local", biased(local(shape(1, 17, 113, 2, 2, 32, 32, F32), 20, 5), bias(2))},
      {"softcap", biased(ranged(softcap(shape(1, 70, 70, 2, 2, 64, 64, F32), 1.5f), 1.5f), bias(2))},
      {"block_sparse", biased(masked(shape(1, 113, 130, 2, 1, 32, 32, F32), blk(32, 64, 0.5f)), bias(2))},
      {"bitmask_causal", biased(bitmasked(causal(shape(1, 90, 90, 2, 2, 32, 32, F32)), bits(BitPattern::Random, 0.6f)),
                                bias_holes(bias(2), 0.1f))},
      {"varlen_empty_seqs", biased(varlen(shape(1, 0, 0, 2, 1, 64, 64, F32), {0, 17, 1, 70, 5}, {3, 17, 0, 100, 5}),
                                   bias(2, true))},
      {"varlen_causal_seqused",
       biased(causal(used(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {20, 33, 8, 0}, {25, 40, 8, 5}), {15, 33, 0, 0},
                          {25, 17, 3, 0})),
              bias(1))},
      {"fixed_seqused", biased(used(shape(3, 40, 50, 2, 2, 32, 32, F32), {40, 7, 0}, {1, 50, 20}), bias(1, true))},
      {"padded", biased(padded(causal(shape(2, 33, 47, 4, 2, 32, 48, F32)), 5), bias(2, true))},
      {"s4097", biased(shape(1, 4097, 40, 1, 1, 16, 16, F32), bias_no_grad(bias()))},
      {"splits3", split},
      {"fp16", biased(shape(2, 70, 70, 2, 1, 64, 64, F16), bias(2, false, F16))},
      {"bf16_causal", biased(causal(shape(1, 113, 113, 2, 2, 64, 64, BF16)), bias(1, false, BF16))},
      {"bf16_varlen_local", biased(local(varlen(shape(1, 0, 0, 2, 2, 32, 32, BF16), {17, 0, 50}, {30, 4, 50}), 10, 10),
                                   bias(2, true, BF16))},
  };
}

}  // namespace fastattn::testing
