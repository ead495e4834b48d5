// The block-sparse configurations the CPU backend is checked on, forward and backward: densities
// 0 / 0.3 / 0.7 / 1, block sizes 1, 16, 100, 128 and mixed, dims 0 and 1 broadcast or not
// (1, heads_kv, heads_q mask heads), transposed / reversed / stride-0 layouts, padded dims,
// odd lengths (1, 17, 113, 4097), s_q != s_k, causal, windows, softcap, varlen with empty
// sequences and seqused, a batch entry whose blocks are all dropped, GQA, fp16 / bf16, splits.
#pragma once

#include <vector>

#include "cpu_cases.h"

namespace fastattn::testing {

inline BlockMaskSpec blk(int block_q, int block_k, float density, int heads = 1, bool per_batch = false) {
  BlockMaskSpec m;
  m.on = true;
  m.block_q = block_q;
  m.block_k = block_k;
  m.density = density;
  m.heads = heads;
  m.per_batch = per_batch;
  return m;
}
inline BlockMaskSpec laid(BlockMaskSpec m, int layout) { m.layout = layout; return m; }
inline BlockMaskSpec padded_blocks(BlockMaskSpec m, int extra) { m.extra = extra; return m; }
inline BlockMaskSpec emptied(BlockMaskSpec m, int batch) { m.empty_batch = batch; return m; }
inline CaseSpec masked(CaseSpec s, BlockMaskSpec m) { s.blocks = m; return s; }

inline std::vector<NamedCase> block_mask_cases() {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  CaseSpec split = masked(shape(1, 70, 200, 2, 1, 32, 32, F32), blk(16, 16, 0.5f));
  split.num_splits = 3;
  return {
      {"density0", masked(shape(2, 40, 50, 2, 1, 32, 32, F32), blk(16, 16, 0.0f))},
      {"density03", masked(shape(2, 40, 50, 2, 1, 32, 32, F32), blk(16, 16, 0.3f))},
      {"density07", masked(shape(2, 40, 50, 2, 1, 32, 32, F32), blk(16, 16, 0.7f)), 1},
      {"density1", masked(shape(2, 40, 50, 2, 1, 32, 32, F32), blk(16, 16, 1.0f))},
      {"block1", masked(shape(1, 17, 23, 2, 2, 16, 16, F32), blk(1, 1, 0.5f, 2))},
      {"block128", masked(shape(1, 300, 260, 2, 1, 32, 32, F32), blk(128, 128, 0.6f))},
      {"block100_sq_gt_sk", masked(shape(1, 230, 113, 2, 2, 32, 32, F32), blk(100, 100, 0.5f))},
      {"block16x100", masked(shape(1, 113, 250, 2, 1, 32, 32, F32), blk(16, 100, 0.5f, 2)), 3},
      {"s1", masked(shape(2, 1, 1, 2, 2, 32, 32, F32), blk(16, 16, 0.5f, 1, true))},
      {"s17_causal", masked(causal(shape(1, 17, 17, 2, 2, 64, 64, F32)), blk(4, 4, 0.6f))},
      {"sq113_sk17_causal", masked(causal(shape(1, 113, 17, 2, 2, 32, 32, F32)), blk(16, 8, 0.7f))},
      {"sq17_sk113_local", masked(local(shape(1, 17, 113, 2, 2, 32, 32, F32), 20, 5), blk(8, 16, 0.5f))},
      {"causal_local", masked(causal(local(shape(1, 113, 113, 2, 1, 64, 64, F32), 16, -1)), blk(16, 16, 0.5f))},
      {"heads_kv_per_batch", masked(shape(2, 65, 70, 4, 2, 32, 32, F32), blk(16, 16, 0.5f, 2, true))},
      {"heads_q_gqa4", masked(shape(1, 65, 70, 4, 1, 32, 32, F32), blk(32, 16, 0.5f, 4))},
      {"heads1_gqa8_causal", masked(causal(shape(1, 70, 70, 8, 1, 32, 32, F32)), blk(16, 16, 0.5f))},
      {"layout_transposed", masked(shape(1, 70, 90, 2, 2, 32, 32, F32), laid(blk(16, 16, 0.5f, 2), 1))},
      {"layout_reversed", masked(shape(2, 70, 90, 2, 2, 32, 32, F32), laid(blk(16, 16, 0.5f, 1, true), 2))},
      {"layout_head_stride0", masked(shape(1, 50, 60, 4, 2, 32, 32, F32), laid(blk(16, 16, 0.5f, 4), 3))},
      {"extra_blocks", masked(shape(1, 50, 60, 2, 2, 32, 32, F32), padded_blocks(blk(16, 16, 0.5f), 3))},
      {"varlen_empty_seqs", masked(varlen(shape(1, 0, 0, 2, 1, 64, 64, F32), {0, 17, 1, 70, 5}, {3, 17, 0, 100, 5}),
                                   blk(16, 16, 0.5f, 2, true))},
      {"varlen_causal_seqused",
       masked(causal(used(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {20, 33, 8, 0}, {25, 40, 8, 5}), {15, 33, 0, 0},
                          {25, 17, 3, 0})),
              blk(8, 8, 0.6f, 1, true))},
      {"fixed_seqused", masked(used(shape(3, 40, 50, 2, 2, 32, 32, F32), {40, 7, 0}, {1, 50, 20}), blk(16, 16, 0.6f))},
      {"empty_sequence", masked(shape(3, 40, 40, 2, 2, 32, 32, F32), emptied(blk(16, 16, 0.8f, 1, true), 1))},
      {"softcap", masked(ranged(softcap(shape(1, 70, 70, 2, 2, 64, 64, F32), 1.5f), 1.5f), blk(16, 32, 0.5f))},
      {"padded", masked(padded(causal(shape(2, 33, 47, 4, 2, 32, 48, F32)), 5), blk(8, 16, 0.5f, 2, true))},
      {"s4097", masked(shape(1, 4097, 40, 1, 1, 16, 16, F32), blk(128, 16, 0.5f))},
      {"splits3", split},
      {"fp16", masked(shape(2, 70, 70, 2, 1, 64, 64, F16), blk(32, 32, 0.5f))},
      {"bf16_causal", masked(causal(shape(1, 113, 113, 2, 2, 64, 64, BF16)), blk(16, 64, 0.5f, 2))},
      {"bf16_varlen_local", masked(local(varlen(shape(1, 0, 0, 2, 2, 32, 32, BF16), {17, 0, 50}, {30, 4, 50}), 10, 10),
                                   blk(16, 16, 0.7f, 1, true))},
  };
}

}  // namespace fastattn::testing
