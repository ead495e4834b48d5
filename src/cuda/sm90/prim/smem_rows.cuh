// Zeroing whole rows of 128-byte-swizzled smem atoms (the layout TMA's 128-byte swizzle writes):
// a row of an atom is one contiguous 128-byte line at row * 128 (the swizzle only permutes its
// 16-byte chunks), so a row is zeroed whatever the swizzle, by 8 threads of one 16-byte store each.
// The callers fence (fence_smem_for_tma) and sync before an MMA reads the rows through the async proxy.
#pragma once

#include <cstdint>

#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/tma.cuh"

namespace fastattn::sm90 {

// Rows [first_row, Rows) of `Atoms` atoms (atom a at base + a * atom_bytes), by `Threads` threads
// (this one: `thread`). Unrolled, each store predicated on its row: no loop state to keep live.
template <int Rows, int Atoms, int Threads>
__device__ __forceinline__ void zero_atom_rows(uint32_t base, uint32_t atom_bytes, int first_row, int thread) {
  static_assert(Threads % 8 == 0, "8 threads a row");
  constexpr int kRowsARound = Threads / 8;
  const uint32_t chunk = base + (thread % 8) * 16;
#pragma unroll
  for (int i = 0; i < (Rows + kRowsARound - 1) / kRowsARound; ++i) {
    const int r = thread / 8 + i * kRowsARound;
    if (r < first_row || (Rows % kRowsARound != 0 && r >= Rows)) continue;
#pragma unroll
    for (int a = 0; a < Atoms; ++a)
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(chunk + a * atom_bytes + r * 128), "r"(0)
                   : "memory");
  }
}

// The same as a rolled loop over this thread's rows, for code with few registers to spare (the
// backward's producer warpgroup runs on 24).
template <int Rows, int Atoms, int Threads>
__device__ __forceinline__ void zero_atom_rows_rolled(uint32_t base, uint32_t atom_bytes, int first_row, int thread) {
  static_assert(Threads % 8 == 0, "8 threads a row");
  constexpr int kRowsARound = Threads / 8;
  const int r0 = thread / 8;
  int r = first_row <= r0 ? r0 : r0 + (first_row - r0 + kRowsARound - 1) / kRowsARound * kRowsARound;
#pragma unroll 1
  for (uint32_t at = base + (thread % 8) * 16 + r * 128; r < Rows; r += kRowsARound, at += kRowsARound * 128) {
#pragma unroll 1
    for (int a = 0; a < Atoms; ++a)
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(at + a * atom_bytes), "r"(0) : "memory");
  }
}

// One warp between a TMA load and the tile's consumers: waits for the load (`landed` at `phase`),
// zeroes rows [first_row, Rows) of the tile's `Atoms` atoms where `zero` (rolled: the producer
// warpgroup's few registers) and fences them for the async proxy, then hands the tile on (lane 0
// arrives at `full`, which counts one arrival). `base()`: the tile's shared address, asked after the
// wait (computed ahead, it moved an instruction into the backward's hand-over warp).
template <int Rows, int Atoms, class Base>
__device__ __forceinline__ void hand_over_rows(uint64_t* landed, uint32_t phase, uint64_t* full, const Base& base,
                                               uint32_t atom_bytes, bool zero, int first_row, int lane) {
  mbar_wait(landed, phase);
  if (zero) {
    zero_atom_rows_rolled<Rows, Atoms, 32>(base(), atom_bytes, first_row, lane);
    fence_smem_for_tma();
  }
  __syncwarp();
  if (lane == 0) mbar_arrive(full);
}

}  // namespace fastattn::sm90
