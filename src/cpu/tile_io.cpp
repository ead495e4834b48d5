#include "cpu/tile_io.h"

#include <cstring>

#include "util/half.h"

namespace fastattn::cpu {
namespace {

// One row of `n` elements to float; the dtype switch sits outside the element loop.
void row_to_float(const char* src, DType dt, int n, float scale, float* dst, int dst_step) {
  switch (dt) {
    case DType::F32: {
      const float* s = reinterpret_cast<const float*>(src);
      for (int c = 0; c < n; ++c) dst[c * dst_step] = s[c] * scale;
      return;
    }
    case DType::F16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (int c = 0; c < n; ++c) dst[c * dst_step] = util::half_to_float(s[c]) * scale;
      return;
    }
    case DType::BF16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (int c = 0; c < n; ++c) dst[c * dst_step] = util::bf16_to_float(s[c]) * scale;
      return;
    }
  }
}

void row_from_float(const float* src, int n, DType dt, char* dst) {
  switch (dt) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case DType::F16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (int c = 0; c < n; ++c) d[c] = util::float_to_half(src[c]);
      return;
    }
    case DType::BF16: {
      uint16_t* d = reinterpret_cast<uint16_t*>(dst);
      for (int c = 0; c < n; ++c) d[c] = util::float_to_bf16(src[c]);
      return;
    }
  }
}

}  // namespace

void load_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols,
               float scale, float* dst, int ld) {
  for (int r = 0; r < rows; ++r) row_to_float(o.row(b, t0 + r, h), o.dtype, cols, scale, dst + r * ld, 1);
}

void load_rows_transposed(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows,
                          int cols, float* dst, int ld) {
  for (int r = 0; r < rows; ++r) row_to_float(o.row(b, t0 + r, h), o.dtype, cols, 1.0f, dst + r, ld);
}

void store_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols,
                const float* src, int ld) {
  for (int r = 0; r < rows; ++r) row_from_float(src + r * ld, cols, o.dtype, o.row(b, t0 + r, h));
}

void zero_rows(const detail::Operand& o, int64_t b, int64_t t0, int64_t h, int rows, int cols) {
  for (int r = 0; r < rows; ++r) std::memset(o.row(b, t0 + r, h), 0, size_t(cols) * size_t(dtype_size(o.dtype)));
}

void add_bias_tile(const detail::BiasView& bias, int64_t b, int64_t h, int64_t i0, int rows, int64_t j0, int cols,
                   float* s, int ld) {
  float row[256];  // a tile row; the CPU tiles are at most 64 keys wide
  const int esize = dtype_size(bias.dtype);
  for (int r = 0; r < rows; ++r) {
    for (int c0 = 0; c0 < cols; c0 += 256) {
      const int n = cols - c0 < 256 ? cols - c0 : 256;
      row_to_float(bias.row(b, h, i0 + r) + (j0 + c0) * esize, bias.dtype, n, 1.0f, row, 1);
      for (int c = 0; c < n; ++c) s[r * ld + c0 + c] += row[c];
    }
  }
}

void add_alibi_tile(float slope, int64_t i0, int rows, int64_t j0, int cols, int64_t diag_offset, float* s, int ld) {
  for (int r = 0; r < rows; ++r) {
    const int64_t diag = i0 + r + diag_offset;
    for (int c = 0; c < cols; ++c) {
      const int64_t dist = diag > j0 + c ? diag - (j0 + c) : j0 + c - diag;
      s[r * ld + c] -= slope * float(dist);
    }
  }
}

}  // namespace fastattn::cpu
