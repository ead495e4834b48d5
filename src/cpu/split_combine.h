// Merging split-KV partial results on the host: each split's output normalised by its own sum,
// and its LSE (natural log; -inf for a split that kept no key of this row).
//   lse = log sum_s exp(lse_s),  out = sum_s exp(lse_s - lse) * o_s
// Splits with lse_s = -inf carry no weight (their o_s is not read); no kept key at all gives
// out = 0 and lse = -inf. The GPU twin is src/cuda/split_combine.cu.
#pragma once

#include <cstdint>

namespace fastattn::cpu {

// Row `row` of `splits` partials laid out as o[(s * rows + row) * dv + c], lse[s * rows + row].
void combine_split_row(int splits, int64_t rows, int dv, const float* o, const float* lse, int64_t row,
                       float* out, float* lse_out);

}  // namespace fastattn::cpu
