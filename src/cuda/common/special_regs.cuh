// Special-register reads of the timing probes and stamps (prof/loop_probes_on.cuh, sm90/bwd/stamps.cuh,
// sm90/fwd/split_stamps.cuh). volatile: read at each call, never cached in a register; the clocks'
// memory clobber keeps loads and stores on their side of the read (arithmetic may still move across).
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

__device__ __forceinline__ long long sreg_clock64() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
  return t;
}
// The low word alone: one register where clock64 takes two.
__device__ __forceinline__ uint32_t sreg_clock32() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%clock;\n" : "=r"(t)::"memory");
  return t;
}
// Nanoseconds, comparable across SMs (the SM clocks are not).
__device__ __forceinline__ unsigned long long sreg_globaltimer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns)::"memory");
  return ns;
}
__device__ __forceinline__ int sreg_smid() {
  int id;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
  return id;
}

}  // namespace fastattn::cuda_backend
