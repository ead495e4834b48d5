// One attention test problem on the host: a spec (shapes, masks, dtype, varlen lengths), fresh
// random inputs, poisoned outputs and gradients, and the AttnArgs that point at them.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fastattn/types.h"
#include "support/bias_case.h"
#include "support/bit_mask_case.h"
#include "support/block_mask_case.h"
#include "support/host_tensor.h"
#include "support/test_rng.h"

namespace fastattn::testing {

struct CaseSpec {
  int batch = 1;
  int seqlen_q = 16, seqlen_k = 16;  // fixed layout; ignored when lens_q is given
  int heads_q = 1, heads_kv = 1;
  int head_dim = 32, head_dim_v = 32;
  DType dtype = DType::F32;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  float scale = std::numeric_limits<float>::quiet_NaN();
  // Varlen when non-empty: per-sequence token counts (batch = lens_q.size()).
  std::vector<int> lens_q, lens_k;
  // Optional seqused (batch entries), in either layout.
  std::vector<int> used_q, used_k;
  // NaN in every q / dout row past used_q and k / v row past used_k (what a caller's padding may hold: an
  // uninitialised buffer); no backend may read them (FA3's TMA loads carried them into P V: its issue #1745).
  bool nan_past_used = false;
  // NaN into this many elements of k inside the used keys (random sequence, key, KV head, column): the rows
  // that keep such a key come out NaN, out and lse, on every backend and path (docs/masks.md, "NaN").
  int nan_keys = 0;
  // The same into v: the rows that keep such a key come out NaN in its column (lse finite), the rows that keep
  // no key exactly 0 (SplitKv.NanInUsedValues).
  int nan_values = 0;
  int pad = 0;  // extra elements per row: non-contiguous token strides
  float input_range = 1.0f;  // inputs uniform in [-range, range)
  int num_splits = 0;        // AttnArgs::num_splits
  BlockMaskSpec blocks;      // a random block-sparse mask when blocks.on
  BitMaskSpec bits;          // an element bitmask when bits.on (not with blocks)
  BiasSpec bias;             // an additive bias when bias.on (with any mask)
  // ALiBi slopes (AttnArgs::alibi_slopes), drawn in [alibi_lo, alibi_hi): 0 none, 1 one a q head (heads_q),
  // 2 one a (batch entry, q head); alibi_pad: extra elements per batch row (a strided 2-D tensor).
  int alibi = 0;
  float alibi_lo = 0.01f, alibi_hi = 1.0f;
  int alibi_pad = 0;

  bool varlen() const { return !lens_q.empty(); }
  std::string describe() const;
};

struct AttnCase {
  CaseSpec spec;
  HostTensor q, k, v, out, lse, dout, dq, dk, dv;
  std::vector<int32_t> cu_q, cu_k, used_q, used_k;
  HostBlockMask blocks;  // empty unless spec.blocks.on
  HostBitMask bits;      // empty unless spec.bits.on
  HostBias bias;         // empty unless spec.bias.on
  HostTensor dbias;      // F32 in bias's logical shape when spec.bias.grad, else empty
  HostTensor alibi;      // F32 slopes when spec.alibi, else empty

  // Args over this case's tensors for `backend` (index arrays and scalars from the spec).
  AttnArgs args(Backend backend = Backend::CPU) const;
  // NaN into out, lse, dq, dk, dv, dbias (inputs and dout untouched).
  void poison_outputs();
};

// Allocates and fills a case: q, k, v, dout uniform in [-range, range) rounded to the dtype.
AttnCase make_case(const CaseSpec& spec, Rng& rng);

// The rows past seqused of sequences 0..batch-1: fn(b, i) for i in [used[b], rows_of(b)); none when used is
// empty. The rows nan_past_used fills with NaN (and the GPU tests' NanPast, tests/gpu/fwd_case.h).
template <class Used, class RowsOf, class Fn>
void for_each_row_past_used(int batch, const Used& used, const RowsOf& rows_of, const Fn& fn) {
  if (used.empty()) return;
  for (int b = 0; b < batch; ++b)
    for (int64_t i = used[size_t(b)], rows = rows_of(b); i < rows; ++i) fn(b, i);
}

}  // namespace fastattn::testing
