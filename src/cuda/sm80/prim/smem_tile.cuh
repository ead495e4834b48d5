// Swizzled smem tiles of the Ampere kernels (forward and backward): the chunk XOR that keeps
// ldmatrix and cp.async phases free of bank conflicts, and the cp.async loader of a tile's rows.
// Cfg gives the tile's geometry: kRowBytes (a row), kChunks (16-byte chunks a row), kThreads (loaders).
#pragma once

#include <cstdint>

#include "cuda/sm80/prim/mma.cuh"

namespace fastattn::sm80 {

// Smem row r, 16-byte chunk c of a tile with Cfg's rows: chunks XORed with r % 8, so that the 8 rows
// an ldmatrix phase reads (same logical chunk, consecutive rows) and the rows a cp.async phase
// writes fall in 8 different bank groups.
template <class Cfg>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return uint32_t(r * Cfg::kRowBytes + ((c ^ (r & 7)) << 4));
}

// Rows [row0, row0 + rows) of one operand's (sequence, head) slice into a swizzled smem tile:
// cp.async, 16 bytes a thread at a time; rows at or past `valid` are zero-filled (never read).
template <class Cfg, int Rows>
__device__ __forceinline__ void load_rows(uint32_t smem, const char* slice, int64_t stride_s_bytes, int row0,
                                          int valid) {
  constexpr int kRowsPerPass = Cfg::kThreads / Cfg::kChunks;
  static_assert(Rows % kRowsPerPass == 0, "whole passes");
  const int c = threadIdx.x % Cfg::kChunks, r0 = threadIdx.x / Cfg::kChunks;
  const char* src = slice + (row0 + r0) * stride_s_bytes + c * 16;
#pragma unroll
  for (int i = 0; i < Rows / kRowsPerPass; ++i) {
    const int r = r0 + i * kRowsPerPass;
    const bool ok = row0 + r < valid;
    cp_async16(smem + swz<Cfg>(r, c), ok ? src : slice, ok);
    src += kRowsPerPass * stride_s_bytes;
  }
}

// The same for rows that do not lie at one stride (a paged KV cache): row j's address from row_at(j),
// asked only for rows below `valid`; `base` stands in as the (unread) source of the zero-filled ones.
template <class Cfg, int Rows, class RowAt>
__device__ __forceinline__ void load_rows_at(uint32_t smem, const char* base, int row0, int valid, RowAt&& row_at) {
  constexpr int kRowsPerPass = Cfg::kThreads / Cfg::kChunks;
  static_assert(Rows % kRowsPerPass == 0, "whole passes");
  const int c = threadIdx.x % Cfg::kChunks, r0 = threadIdx.x / Cfg::kChunks;
#pragma unroll
  for (int i = 0; i < Rows / kRowsPerPass; ++i) {
    const int r = r0 + i * kRowsPerPass;
    const bool ok = row0 + r < valid;
    cp_async16(smem + swz<Cfg>(r, c), ok ? row_at(row0 + r) + c * 16 : base, ok);
  }
}

}  // namespace fastattn::sm80
