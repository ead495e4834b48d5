// Warpgroup MMA (wgmma) on sm_90a: shared-memory matrix descriptors for 128-byte-swizzled tiles,
// and the fence / commit / wait that order the asynchronous MMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace fastattn::sm90 {

// Tiles live in smem as "atoms" of R rows x 64 16-bit columns (128 bytes a row), swizzled with
// the 128-byte pattern (what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B). A head dim of d spans
// ceil(d / 64) atoms, stored one after another.
constexpr int kAtomCols = 64;
constexpr int kAtomRowBytes = 128;

// Descriptor bits: [0,14) start address >> 4, [16,30) leading byte offset >> 4,
// [32,46) stride byte offset >> 4, [62,64) layout (1 = 128-byte swizzle).
//
// Every operand here has the same high word (8-row groups 1024 bytes apart, 128-byte swizzle), so
// a descriptor is built from a low word computed once per tile buffer: an offset of a 16-byte
// multiple inside the buffer adds to the low word without carrying into the leading offset, since
// shared addresses stay below 2^18 (start >> 4 < 2^14). Building each descriptor from its address
// instead cost ptxas 10 uniform instructions per wgmma (mask, shift, or, two 64-bit halves): 120
// of the d = 128 loop's ~610 instructions.
constexpr uint32_t kDescHi = (1024 >> 4) | (1u << 30);

__device__ __forceinline__ uint32_t smem_addr(const void* smem) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem));
}

// The low word of the descriptor of `smem` with the given leading byte offset. kInCluster: the
// kernel may run in a thread-block cluster, where a CTA's shared addresses carry its rank in the
// cluster above bit 24 (the shared::cluster window); the descriptor takes bits [4, 18) of the
// address, so those are masked off (unmasked, they land in the leading offset).
template <bool kInCluster = false>
__device__ __forceinline__ uint32_t desc_lo(const void* smem, uint32_t lbo_bytes) {
  uint32_t a = smem_addr(smem);
  if constexpr (kInCluster) a &= (1u << 18) - 1;
  return (a >> 4) | ((lbo_bytes >> 4) << 16);
}

// The descriptor `byte_offset` bytes past the buffer whose low word is lo (byte_offset % 16 == 0).
__device__ __forceinline__ uint64_t desc_at(uint32_t lo, uint32_t byte_offset) {
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(lo + (byte_offset >> 4)), "n"(kDescHi));
  return d;
}

// K-major operand (rows = M or N, the contraction dim contiguous): the leading offset is unused
// with swizzling. Step k (16 columns) of the contraction starts 32 bytes further inside the atom,
// and at the next atom after 4 steps.
template <bool kInCluster = false>
__device__ __forceinline__ uint32_t desc_k_major_lo(const void* atom0) {
  return desc_lo<kInCluster>(atom0, 16);
}
__device__ __forceinline__ uint64_t desc_k_major(uint32_t lo, int atom_bytes, int k_step) {
  return desc_at(lo, (k_step / 4) * atom_bytes + (k_step % 4) * 32);
}

// N-major B operand (V: keys are the contraction dim, head-dim columns contiguous): step k covers
// 16 key rows (2048 bytes into each atom); the leading offset jumps between 64-column atoms.
template <bool kInCluster = false>
__device__ __forceinline__ uint32_t desc_n_major_lo(const void* atom0, int atom_bytes) {
  return desc_lo<kInCluster>(atom0, static_cast<uint32_t>(atom_bytes));
}
__device__ __forceinline__ uint64_t desc_n_major(uint32_t lo, int k_step) {
  return desc_at(lo, k_step * 16 * kAtomRowBytes);
}

// MN-major A (M contiguous: the backward's dS^T tile, stored key-major, read as dS for dQ = dS K)
// follows the same rules as N-major B: 64 M-columns per atom, step k = 16 rows further.
__device__ __forceinline__ uint32_t desc_mn_major_lo(const void* atom0, int atom_bytes) {
  return desc_n_major_lo(atom0, atom_bytes);
}
__device__ __forceinline__ uint64_t desc_mn_major(uint32_t lo, int k_step) { return desc_n_major(lo, k_step); }

// The same k-step descriptors as the buffer's 64-bit descriptor plus the step's offset: one UIADD3.64 per
// operand and HGMMA, where desc_at's form (the low word plus the offset, paired with the constant high
// word) costs a UIADD3 and a UMOV per operand and HGMMA in the backward's steps (d 256: 259 -> 152 UMOV,
// -1.0 to -1.2 %; d 64 -3 %, d 128 full -1.2 %, deterministic -1.5 %, d 128 causal +0.1-0.25 %: notes).
// The start address field (bits 0-13, address / 16) cannot carry into the next
// field: shared memory ends below 2^18 bytes. Nor can the add carry into the high word: the low word
// is below 2^30 (the leading offset's 14 bits at bit 16), the offset / 16 below 2^14, so the sum is
// desc_at(lo, byte_offset) bit for bit.
__device__ __forceinline__ uint64_t desc_add(uint32_t lo, uint32_t byte_offset) {
  return desc_at(lo, 0) + (byte_offset >> 4);
}
__device__ __forceinline__ uint64_t desc_k_major_add(uint32_t lo, int atom_bytes, int k_step) {
  return desc_add(lo, (k_step / 4) * atom_bytes + (k_step % 4) * 32);
}
__device__ __forceinline__ uint64_t desc_n_major_add(uint32_t lo, int k_step) {
  return desc_add(lo, k_step * 16 * kAtomRowBytes);
}
__device__ __forceinline__ uint64_t desc_mn_major_add(uint32_t lo, int k_step) { return desc_n_major_add(lo, k_step); }

// Orders register accesses before the next wgmma (needed whenever the accumulators or A fragments
// were touched by ordinary instructions).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The same wait spelled differently, for the second arm of a branch: two identical asm statements
// at the head of both arms would be merged into one above the branch (see consume()).
template <int N>
__device__ __forceinline__ void wgmma_wait_alt() {
  asm volatile("wgmma.wait_group.sync.aligned %0; // alt\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads/writes of accumulator registers across an in-flight wgmma.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

#include "cuda/sm90/prim/wgmma_ops.inc"

}  // namespace fastattn::sm90
