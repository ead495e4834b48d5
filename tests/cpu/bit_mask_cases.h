// The element-bitmask configurations the CPU backend is checked on, forward and backward: random
// densities 0 / 0.1 / 0.5 / 0.9 / 1, tiles of empty / full / random blocks, documents, prefix-LM,
// causal spelled as bits; dims 0 and 1 broadcast or not (1, heads_kv, heads_q mask heads), padded
// rows, head stride 0, reversed rows, extra rows and words; odd lengths (1, 17, 113, 4097), s_q != s_k,
// causal, windows, softcap, varlen with empty sequences and seqused, an emptied batch entry, GQA,
// fp16 / bf16, splits.
#pragma once

#include <vector>

#include "cpu_cases.h"

namespace fastattn::testing {

inline BitMaskSpec bits(BitPattern pattern, float density = 0.5f, int heads = 1, bool per_batch = false) {
  BitMaskSpec m;
  m.on = true;
  m.pattern = pattern;
  m.density = density;
  m.heads = heads;
  m.per_batch = per_batch;
  return m;
}
inline BitMaskSpec bits_laid(BitMaskSpec m, int layout) { m.layout = layout; return m; }
inline BitMaskSpec bits_tile(BitMaskSpec m, int tile) { m.tile = tile; return m; }
inline BitMaskSpec bits_extra(BitMaskSpec m, int rows, int words) { m.extra_rows = rows; m.extra_words = words; return m; }
inline BitMaskSpec bits_emptied(BitMaskSpec m, int batch) { m.empty_batch = batch; return m; }
inline CaseSpec bitmasked(CaseSpec s, BitMaskSpec m) { s.bits = m; return s; }

inline std::vector<NamedCase> bit_mask_cases() {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  using P = BitPattern;
  CaseSpec split = bitmasked(shape(1, 70, 200, 2, 1, 32, 32, F32), bits(P::Tiles, 0.5f));
  split.num_splits = 3;
  return {
      {"density0", bitmasked(shape(2, 40, 50, 2, 1, 32, 32, F32), bits(P::Random, 0.0f))},
      {"density01", bitmasked(shape(2, 40, 50, 2, 1, 32, 32, F32), bits(P::Random, 0.1f))},
      {"density05", bitmasked(shape(2, 40, 50, 2, 1, 32, 32, F32), bits(P::Random, 0.5f)), 1},
      {"density09", bitmasked(shape(2, 40, 50, 2, 1, 32, 32, F32), bits(P::Random, 0.9f))},
      {"density1", bitmasked(shape(2, 40, 50, 2, 1, 32, 32, F32), bits(P::Random, 1.0f))},
      {"tiles64", bitmasked(shape(1, 300, 260, 2, 1, 32, 32, F32), bits(P::Tiles, 0.5f))},
      {"tiles16_gqa", bitmasked(shape(1, 113, 250, 4, 2, 32, 32, F32), bits_tile(bits(P::Tiles, 0.3f, 2), 16)), 3},
      {"documents", bitmasked(shape(2, 200, 200, 2, 2, 32, 32, F32), bits(P::Documents, 0.f, 1, true))},
      {"documents_causal", bitmasked(causal(shape(1, 150, 150, 2, 1, 32, 32, F32)), bits(P::Documents))},
      {"prefix_lm", bitmasked(shape(1, 113, 113, 2, 2, 32, 32, F32), bits(P::PrefixLM))},
      {"causal_bits", bitmasked(shape(1, 90, 120, 2, 2, 32, 32, F32), bits(P::Causal))},
      {"all_ones", bitmasked(shape(1, 90, 120, 2, 2, 32, 32, F32), bits(P::AllOnes))},
      {"s1", bitmasked(shape(2, 1, 1, 2, 2, 32, 32, F32), bits(P::Random, 0.5f, 1, true))},
      {"s17_causal", bitmasked(causal(shape(1, 17, 17, 2, 2, 64, 64, F32)), bits(P::Random, 0.6f))},
      {"sq113_sk17_causal", bitmasked(causal(shape(1, 113, 17, 2, 2, 32, 32, F32)), bits(P::Random, 0.7f))},
      {"sq17_sk113_local", bitmasked(local(shape(1, 17, 113, 2, 2, 32, 32, F32), 20, 5), bits(P::Random, 0.5f))},
      {"heads_kv_per_batch", bitmasked(shape(2, 65, 70, 4, 2, 32, 32, F32), bits(P::Random, 0.5f, 2, true))},
      {"heads_q_gqa4", bitmasked(shape(1, 65, 70, 4, 1, 32, 32, F32), bits(P::Tiles, 0.5f, 4))},
      {"heads1_gqa8_causal", bitmasked(causal(shape(1, 70, 70, 8, 1, 32, 32, F32)), bits(P::Random, 0.5f))},
      {"layout_row_padded", bitmasked(shape(1, 70, 90, 2, 2, 32, 32, F32), bits_laid(bits(P::Random, 0.5f, 2), 1))},
      {"layout_head_stride0", bitmasked(shape(1, 50, 60, 4, 2, 32, 32, F32), bits_laid(bits(P::Random, 0.5f, 4), 2))},
      {"layout_rows_reversed", bitmasked(shape(2, 50, 60, 2, 2, 32, 32, F32), bits_laid(bits(P::Tiles, 0.5f, 1, true), 3))},
      {"extra_rows_words", bitmasked(shape(1, 50, 60, 2, 2, 32, 32, F32), bits_extra(bits(P::Random, 0.5f), 7, 2))},
      {"varlen_empty_seqs", bitmasked(varlen(shape(1, 0, 0, 2, 1, 64, 64, F32), {0, 17, 1, 70, 5}, {3, 17, 0, 100, 5}),
                                      bits(P::Random, 0.5f, 2, true))},
      {"varlen_causal_seqused",
       bitmasked(causal(used(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {20, 33, 8, 0}, {25, 40, 8, 5}), {15, 33, 0, 0},
                             {25, 17, 3, 0})),
                 bits(P::Random, 0.6f, 1, true))},
      {"fixed_seqused", bitmasked(used(shape(3, 40, 50, 2, 2, 32, 32, F32), {40, 7, 0}, {1, 50, 20}), bits(P::Random, 0.6f))},
      {"empty_sequence", bitmasked(shape(3, 40, 40, 2, 2, 32, 32, F32), bits_emptied(bits(P::Random, 0.8f, 1, true), 1))},
      {"softcap", bitmasked(ranged(softcap(shape(1, 70, 70, 2, 2, 64, 64, F32), 1.5f), 1.5f), bits(P::Tiles, 0.5f))},
      {"padded", bitmasked(padded(causal(shape(2, 33, 47, 4, 2, 32, 48, F32)), 5), bits(P::Random, 0.5f, 2, true))},
      {"s4097", bitmasked(shape(1, 4097, 40, 1, 1, 16, 16, F32), bits(P::Tiles, 0.5f))},
      {"splits3", split},
      {"fp16", bitmasked(shape(2, 70, 70, 2, 1, 64, 64, F16), bits(P::Random, 0.5f))},
      {"bf16_causal", bitmasked(causal(shape(1, 113, 113, 2, 2, 64, 64, BF16)), bits(P::Documents, 0.f, 2))},
      {"bf16_varlen_local", bitmasked(local(varlen(shape(1, 0, 0, 2, 2, 32, 32, BF16), {17, 0, 50}, {30, 4, 50}), 10, 10),
                                      bits(P::Random, 0.7f, 1, true))},
  };
}

}  // namespace fastattn::testing
