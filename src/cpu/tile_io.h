// Moving tiles between strided fp16/bf16/fp32 tensors and contiguous fp32 scratch.
#pragma once

#include <cstdint>

#include "api/problem.h"

namespace fastattn::cpu {

// Rows t0 .. t0+rows-1 of head h of sequence b (t counts along the operand's token axis),
// first `cols` columns, times `scale`, into dst[r * ld + c].
void load_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols,
               float scale, float* dst, int ld);

// The same rows transposed: dst[c * ld + r].
void load_rows_transposed(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows,
                          int cols, float* dst, int ld);

// src[r * ld + c] rounded to the operand's dtype into rows t0 .. t0+rows-1.
void store_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols,
                const float* src, int ld);

// Zeros rows t0 .. t0+rows-1 (first `cols` columns).
void zero_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols);

// s[r * ld + c] += bias(b, h, i0 + r, j0 + c) for r < rows, c < cols (the additive score bias).
void add_bias_tile(const detail::BiasView& bias, int64_t b, int64_t h, int64_t i0, int rows, int64_t j0, int cols,
                   float* s, int ld);
// s[r * ld + c] -= slope * |i0 + r + diag_offset - (j0 + c)| (ALiBi; diag_offset = len_k - len_q), in fp32.
void add_alibi_tile(float slope, int64_t i0, int rows, int64_t j0, int cols, int64_t diag_offset, float* s, int ld);

}  // namespace fastattn::cpu
