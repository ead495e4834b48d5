// A random block-sparse mask (fastattn::BlockMask) for a test case: its spec, its owned bytes and
// the view AttnArgs gets. Used through CaseSpec::blocks (attn_case.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastattn/types.h"
#include "support/test_rng.h"

namespace fastattn::testing {

struct BlockMaskSpec {
  bool on = false;
  bool per_batch = false;  // dim 0: batch entries, else 1 (shared)
  int heads = 1;           // dim 1: 1, heads_kv or heads_q (any divisor of heads_q)
  int block_q = 128, block_k = 128;
  float density = 0.5f;    // chance each entry is kept (0: none, 1: all)
  int extra = 0;           // dims 2 and 3 this much longer than needed (FlexAttention pads)
  // Memory order: 0 row-major; 1 dims 2 and 3 swapped in memory (a transposed view); 2 dim 3
  // reversed (negative stride); 3 dim 1 broadcast (stride 0, one head's bytes for all).
  int layout = 0;
  int empty_batch = -1;    // with per_batch: this batch entry's blocks are all dropped
  std::string describe() const;
};

struct HostBlockMask {
  std::vector<uint8_t> bytes;
  BlockMask view;          // view.data: bytes.data() + origin at the time of view_at()
  int64_t origin = 0;      // element of bytes that entry (0, 0, 0, 0) is
  bool defined() const { return !bytes.empty(); }
  BlockMask view_at() const;  // the view over this object's bytes (valid after copies)
};

// Dims 2, 3: ceil(max_rows / block) + extra (at least 1). Entries kept with spec.density,
// kept entries any nonzero byte (nonzero = kept, not only 1).
HostBlockMask make_block_mask(const BlockMaskSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng);

}  // namespace fastattn::testing
