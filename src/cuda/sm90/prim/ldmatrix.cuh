// ldmatrix (sm_75+): a warp loads four 8 x 8 matrices of 16-bit elements from shared memory into the
// MMA fragment layout (lane l receives row l / 4, columns 2 (l % 4) and + 1 of each, as one 32-bit
// register), one 16-byte row per address; lanes 8 m .. 8 m + 7 give the addresses of matrix m's rows
// 0..7. The inverse of stmatrix_x4 (stmatrix.cuh).
#pragma once

#include <cstdint>

namespace fastattn::sm90 {

__device__ __forceinline__ void ldmatrix_x4(uint32_t row_addr, uint32_t (&m)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
               : "r"(row_addr)
               : "memory");
}
// The same with .trans: lane l receives row l / 4, columns 2 (l % 4) and + 1 of each matrix transposed
// (i.e. column l / 4, rows 2 (l % 4) and + 1 of the matrix in smem).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t row_addr, uint32_t (&m)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
               : "r"(row_addr)
               : "memory");
}

}  // namespace fastattn::sm90
