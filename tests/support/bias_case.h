// An additive score bias (AttnArgs::bias) for a test case: its spec (dims, dtype, layout, -inf
// holes), owned storage and the view AttnArgs gets; and the dbias output a backward fills. Used
// through CaseSpec::bias (attn_case.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastattn/types.h"
#include "support/host_tensor.h"
#include "support/test_rng.h"

namespace fastattn::testing {

struct BiasSpec {
  bool on = false;
  DType dtype = DType::F32;
  bool per_batch = false;  // dim 0: batch entries, else 1 (shared)
  int heads = 1;           // dim 1: a divisor of heads_q
  float range = 2.0f;      // entries uniform in [-range, range)
  int extra_rows = 0, extra_cols = 0;  // dims 2, 3 this much longer than the longest sequence
  // Memory order: 0 row-major; 1 rows padded by 8 elements (row stride free); 2 dim 1 broadcast
  // (stride 0, one stored head).
  int layout = 0;
  float neginf = 0.0f;     // fraction of entries set to -inf (they mask)
  int neginf_row = -1;     // this bias row is -inf everywhere (every (b, h)): out 0, lse -inf
  bool grad = false;       // the backward asks dbias too
  std::string describe() const;
};

struct HostBias {
  HostTensor storage;        // what is stored: dim 1 of size 1 under layout 2
  int64_t broadcast_heads = 0;  // layout 2: the bias heads dim 1 is widened to (stride 0)
  bool defined() const { return storage.view().defined(); }
  // What AttnArgs::bias gets (computed from `storage`, so copies of a case point at their own).
  Tensor view() const;
};

// Dims: (batch or 1, heads, max_rows_q + extra_rows, max_rows_k + extra_cols).
HostBias make_bias(const BiasSpec& spec, int batch, int max_rows_q, int max_rows_k, Rng& rng);

}  // namespace fastattn::testing
