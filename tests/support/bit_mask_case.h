// An element bitmask (fastattn::BitMask) for a test case: its spec (a pattern, its layout), its owned
// words and the view AttnArgs gets. Used through CaseSpec::bits (attn_case.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastattn/types.h"
#include "support/test_rng.h"

namespace fastattn::testing {

enum class BitPattern {
  Random,     // every bit kept with `density`
  Tiles,      // per (tile x tile) block of pairs: empty, full or random (density), a third each
  Documents,  // `docs` documents of random lengths over the positions: keep(i, j) = doc(i) == doc(j)
  PrefixLM,   // keep(i, j) = j < prefix or j <= i (bidirectional prefix, causal rest)
  Causal,     // keep(i, j) = j <= i + (max_rows_k - max_rows_q): causal spelled as bits
  AllOnes,    // every bit kept (garbage-free: the bits past the keys are 1 too)
};

struct BitMaskSpec {
  bool on = false;
  BitPattern pattern = BitPattern::Random;
  bool per_batch = false;  // dim 0: batch entries, else 1 (shared)
  int heads = 1;           // dim 1: a divisor of heads_q
  float density = 0.5f;
  int tile = 64;           // Tiles: block edge
  int docs = 4;            // Documents
  int prefix = 17;         // PrefixLM
  int extra_rows = 0, extra_words = 0;  // dims 2, 3 this much longer than needed
  // Memory order: 0 row-major; 1 rows padded by 3 words (row stride free); 2 dim 1 broadcast (stride
  // 0); 3 dim 2 reversed (negative row stride).
  int layout = 0;
  int empty_batch = -1;    // with per_batch: this batch entry keeps nothing
  std::string describe() const;
};

struct HostBitMask {
  std::vector<uint32_t> words;
  BitMask view;
  int64_t origin = 0;  // word of `words` that (0, 0, 0, word 0) is
  bool defined() const { return !words.empty(); }
  BitMask view_at() const;
  bool keeps(int64_t b, int64_t h_mask, int64_t i, int64_t j) const;
};

// Dims 2, 3: max_rows_q + extra_rows, ceil(max_rows_k / 32) + extra_words. Bits past max_rows_k are
// random (fastattn ignores them).
HostBitMask make_bit_mask(const BitMaskSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng);

}  // namespace fastattn::testing
