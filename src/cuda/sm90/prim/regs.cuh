// Register reallocation between warpgroups (sm_90a setmaxnreg) and warp-level helpers.
#pragma once

#include <cstdint>

namespace fastattn::sm90 {

// Every warp of a warpgroup must execute the same setmaxnreg. Takes effect only when the kernel
// has a register cap at entry (__launch_bounds__(threads, 1)).
template <int R>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// Named barrier among `threads` threads (a multiple of 32); id 0 is __syncthreads'.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The same two in PTX's non-aligned form (barrier.sync / barrier.arrive without .aligned). bar.sync
// is barrier.sync.aligned, whose participants must all execute the same instruction; where they
// reach the barrier from different code (two template instances of a warpgroup's loop) only this
// form is defined. ptxas adds a divergence check (BRA.DIV) or a WARPSYNC before the BAR.
__device__ __forceinline__ void named_bar_sync_unaligned(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive_unaligned(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace fastattn::sm90
