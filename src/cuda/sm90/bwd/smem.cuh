// Shared memory of the Hopper backward's main kernel, and shared-memory accesses by address (its
// named barriers are in sm90/prim/barriers.h).
#pragma once

#include <cstdint>

#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/prim/barriers.h"

namespace fastattn::sm90 {

template <class Cfg>
struct BwdSmem {
  alignas(1024) uint8_t k[Cfg::kKBytes];
  alignas(1024) uint8_t v[Cfg::kKBytes];
  alignas(1024) uint8_t q[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t dout[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t ds[2][Cfg::kBlockN * 128];  // dS^T, keys x 64 q rows: one atom; two steps deep
  // P^T in the same layout (split shape only: both warpgroups' dV MMAs read all of its q rows).
  alignas(1024) uint8_t pt[Cfg::kSplitD ? 2 : 1][Cfg::kSplitD ? Cfg::kBlockN * 128 : 16];
  alignas(128) float dq[Cfg::kDqInStage ? 4 : 64 * Cfg::kHeadDim];  // this step's dQ, fragment order
  alignas(16) float lse[Cfg::kStages][64];
  alignas(16) float dpsum[Cfg::kStages][64];
  uint64_t kv_full, q_full[Cfg::kStages], q_empty[Cfg::kStages];
  int item;  // the CTA's work item (kernel.cuh): here, not in static smem, which would offset the base
};

// Bytes requested past the struct so the kernel can align its base to 1024 (the 128-byte swizzle's
// period): none where that would pass the 227 KB a block may opt into (d 256: 226 KB of struct).
// There the extern array's declared 1024-byte alignment places the base, which the kernel checks.
template <class Cfg>
constexpr int kBwdSmemSlack = sizeof(BwdSmem<Cfg>) + 1024 <= 227 * 1024 ? 1024 : 0;

// Shared-memory accesses by address: the smem struct is reached through an aligned integer, so
// the compiler no longer knows the pointers are shared and would emit generic loads and stores.
__device__ __forceinline__ float2 lds_f32x2(uint32_t addr) {
  float2 v;
  asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts_f32x4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

}  // namespace fastattn::sm90
