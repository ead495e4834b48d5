// The sm_80 primitives of the Ampere kernels, as inline PTX: cp.async (16-byte global -> smem copies
// that bypass the registers, with zero fill past a tensor's end), ldmatrix (four 8x8 matrices of
// 16-bit elements per warp instruction, plain or transposed) and mma.sync m16n8k16 with fp32
// accumulators. All of them also run on sm_86 / sm_89 and, from the compute_80 PTX, on sm_90.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace fastattn::sm80 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes from global `src` to smem `dst`; with `valid` false the 16 bytes are zeros and nothing is
// read (src-size 0), so a row past a sequence's end or a tensor's last row is never touched. .cg:
// through L2 only (K and V are read once per CTA; L1 would hold nothing worth keeping).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 matrices; lane l gives the address of row l % 8 of matrix l / 8, and receives in r[i]
// row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (with .trans: of matrix i transposed).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a * b: A 16x16 row-major (a[0..3]: rows g / g+8, columns 2t.. / 8+2t.., g = lane / 4,
// t = lane % 4), B 16x8 column-major (b[0]: k rows 2t.., b[1]: 8+2t.., column g), C 16x8
// (c[0..1]: row g, columns 2t, 2t+1; c[2..3]: row g+8).
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  // Not volatile: a pure register function, which the compiler may schedule freely.
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace fastattn::sm80
