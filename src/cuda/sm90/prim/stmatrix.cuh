// stmatrix (sm_90): a warp stores four 8 x 8 matrices of 16-bit elements from the MMA accumulator
// layout (lane l holds row l / 4, columns 2 (l % 4) and + 1 of each, as one 32-bit register) to
// shared memory, one 16-byte row per address; lanes 8 m .. 8 m + 7 give the addresses of matrix m's
// rows 0..7. One instruction moves 512 bytes where 32-bit stores move 128.
#pragma once

#include <cstdint>

namespace fastattn::sm90 {

__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_addr), "r"(m0),
               "r"(m1), "r"(m2), "r"(m3)
               : "memory");
}

// The same with each 8 x 8 matrix stored transposed: lane l's pair (row l / 4, columns 2 (l % 4), + 1)
// lands in memory rows 2 (l % 4), + 1 at element l / 4, so the addresses name the matrix's columns.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t row_addr, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_addr), "r"(m0),
               "r"(m1), "r"(m2), "r"(m3)
               : "memory");
}

// Two matrices, transposed: lanes 0..15 give the addresses (the upper lanes' are ignored).
__device__ __forceinline__ void stmatrix_x2_trans(uint32_t row_addr, uint32_t m0, uint32_t m1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(row_addr), "r"(m0), "r"(m1)
               : "memory");
}

}  // namespace fastattn::sm90
