// Declaration of the Ampere (sm_80) forward launcher; its (dtype, d) instances are compiled in the
// generated sm80/fwd_<dtype>_d<d>.cu files and listed in fwd_dispatch.inc (src/cuda/sources.cmake).
// What it does not take (split-KV, block-sparse masks, KV caches, the backward) check_forward and
// forward refuse by name before it is reached (backend.cu).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "cuda/launch_plan.h"
#include "fastattn/types.h"

namespace fastattn::sm80 {
template <class T, int D, int DV = D>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);

// d 128's K/V order (sm80/fwd/config.h): FA2's (one K and one V buffer, 64 KB) where it fits twice
// the CTAs of the 2-stage ring (96 KB) on an SM (the A100: 2 against 1), else the ring (H100: 2 and 2;
// sm_86 / 89: 1 and 1), which lets the softmax overlap PV. The tests and the bench force either.
enum class KvOrder { Auto = 0, Fa2 = 1, Ring = 2 };
inline std::atomic<int>& kv_order_override() {
  static std::atomic<int> order{0};
  return order;
}
inline void set_kv_order(KvOrder o) { kv_order_override().store(int(o), std::memory_order_relaxed); }
// Whether d 128 takes the ring on a device whose SM holds `smem_per_sm` bytes.
inline bool ring_at_d128(int smem_per_sm) {
  const int o = kv_order_override().load(std::memory_order_relaxed);
  if (o != 0) return o == int(KvOrder::Ring);
  constexpr int kReserved = 1024;  // the driver's per-CTA reservation
  constexpr int kByRegisters = 2;  // 255 registers x 128 threads: two CTAs in an SM's 64K registers
  const int fa2 = smem_per_sm / (64 * 1024 + kReserved), ring = smem_per_sm / (96 * 1024 + kReserved);
  return (ring < kByRegisters ? ring : kByRegisters) >= (fa2 < kByRegisters ? fa2 : kByRegisters);
}
}
