// Shared memory of the Hopper backward's main kernel, and shared-memory accesses by address (its
// named barriers are in sm90/prim/barriers.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/prim/barriers.h"

namespace fastattn::sm90 {

// The dQ ring's store job (dq.cuh): kind, staging buffer, q head, q-block, slot, ring position, step.
constexpr int kRingJobFields = 7;

// Opt-in shared memory per CTA on sm_90 (227 KB), and the slack that aligns the struct to 1024 (the
// 128-byte swizzle's period; dynamic shared memory starts 16-byte aligned at least).
inline constexpr int kBwdSmemMax = 227 * 1024;
inline constexpr int kBwdAlignSlack = 1024 - 16;

template <class Cfg>
struct BwdSmem {
  static constexpr int kDqBytes = Cfg::kBlockM * Cfg::kHeadDim * 4;
  static constexpr int kDsBytes = Cfg::kBlockN * 2 * Cfg::kBlockM;  // keys x kBlockM q rows of 16 bits
  // A dO stage's bytes: dO's, or where dQ is staged in the Q / dO stage the rest of dQ past Q's bytes
  // if that is more (192 / 128: dO 16 KB, dQ 48 KB past Q's 24 KB; the TMA fills the first 16 KB).
  static constexpr int kDoStageBytes = Cfg::kDqInStage && kDqBytes - Cfg::kQBytes > Cfg::kDoBytes
                                           ? kDqBytes - Cfg::kQBytes : Cfg::kDoBytes;
  // Everything before dq (the operand buffers, lse / D, barriers), with room to spare.
  static constexpr int kFixedBytes = Cfg::kKBytes + Cfg::kVBytes + Cfg::kStages * (Cfg::kQBytes + kDoStageBytes) + 2 * kDsBytes +
                                     (Cfg::kSplitD ? 2 * Cfg::kBlockN * 128 : 0) + 2 * Cfg::kStages * Cfg::kBlockM * 4 +
                                     128;
  static constexpr int padded(int bytes) { return (bytes + 1023) / 1024 * 1024; }
  // dQ staging at d <= 128: two buffers where they fit, so that the consumers run a step ahead of the
  // dQ writer warp (which in deterministic mode also waits for the q-block's turn: dq.cuh). d > 128
  // stages dQ in the step's Q / dO stage instead (kDqInStage): no buffer.
  static constexpr int kDqBufs =
      Cfg::kDqInStage ? 1 : (padded(kFixedBytes + 2 * kDqBytes) + kBwdAlignSlack <= kBwdSmemMax ? 2 : 1);
  alignas(1024) uint8_t k[Cfg::kKBytes];
  alignas(1024) uint8_t v[Cfg::kVBytes];
  alignas(1024) uint8_t q[Cfg::kStages][Cfg::kQBytes];
  alignas(1024) uint8_t dout[Cfg::kStages][kDoStageBytes];
  // dS^T, keys x kBlockM q rows: one atom per 64 q rows (q rows 64 a.. in atom a); two steps deep.
  // Cfg::kDsQMajor: dS, kBlockM q rows x keys, one atom per 64 keys (as Q for S^T).
  alignas(1024) uint8_t ds[2][kDsBytes];
  // P^T in the same layout (split shape only: both warpgroups' dV MMAs read all of its q rows).
  alignas(1024) uint8_t pt[Cfg::kSplitD ? 2 : 1][Cfg::kSplitD ? Cfg::kBlockN * 128 : 16];
  // The q-block's lse / D in the workspace's order (Cfg::kStatsByQuad: by quad column, preprocess.cuh).
  alignas(16) float lse[Cfg::kStages][Cfg::kBlockM];
  alignas(16) float dpsum[Cfg::kStages][Cfg::kBlockM];
  uint64_t kv_full, q_full[Cfg::kStages], q_empty[Cfg::kStages];
  uint64_t kv_empty;  // paired key blocks: the consumers are done with the first tile's K / V (kernel.cuh)
  // Consumers -> dQ writer (-> consumers: dq_empty). d <= 128: per staging buffer. d > 128: per ring
  // stage and half, dq_full[2 s + half] (d 256: half 0 in the stage's dO atoms, half 1 in its Q atoms;
  // d 192: half 0 only), the stage itself going back by q_empty.
  uint64_t dq_full[Cfg::kDqInStage ? 2 * Cfg::kStages : kDqBufs], dq_empty[kDqBufs];
  int item;  // the CTA's work item (kernel.cuh): here, not in static smem, which would offset the base
  // Last but the ring's fields, so that a launch without the staging (d > 128) leaves it out.
  alignas(128) float dq[kDqBufs][Cfg::kDqInStage ? 4 : Cfg::kBlockM * Cfg::kHeadDim];  // a step's dQ, fragment order
  // The dQ ring's writer (d 128 only; dq.cuh, bwd_ring_lead): a slot's load back into the staging
  // buffer completes on ring_full; a store job (kind, buffer, q head, q-block, slot, position, step)
  // goes to the storers in ring_job[post % 2]. After dq, so that the other paths' offsets stay where they were.
  uint64_t ring_full;
  int ring_job[2][kRingJobFields];
  // With seqused_q, the loads' barriers in the kernels with a hand-over warp (producer.cuh, bwd_hand_over_q):
  // it zeroes the rows past seqused_q, then arrives at q_full. Last, so that the other kernels keep every offset.
  uint64_t q_landed[Cfg::kStages];
};

// The bytes a launch asks for: the struct (without dq where dQ is staged in the Q / dO stage), plus
// the slack that aligns its base to 1024 unless that would pass 227 KB (d 256); the extern array's
// declared 1024-byte alignment places the base then, which the kernel checks.
template <class Cfg>
constexpr int bwd_smem_struct_bytes() {
  return !Cfg::kDqInStage ? int(sizeof(BwdSmem<Cfg>)) : int(offsetof(BwdSmem<Cfg>, dq));
}
template <class Cfg>
constexpr int kBwdSmemSlack = bwd_smem_struct_bytes<Cfg>() + kBwdAlignSlack <= kBwdSmemMax ? kBwdAlignSlack : 0;

// Shared-memory accesses by address: the smem struct is reached through an aligned integer, so
// the compiler no longer knows the pointers are shared and would emit generic loads and stores.
__device__ __forceinline__ float lds_f32(uint32_t addr) {
  float v;
  asm("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ float2 lds_f32x2(uint32_t addr) {
  float2 v;
  asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ float4 lds_f32x4(uint32_t addr) {
  float4 v;
  asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts_f32x4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

}  // namespace fastattn::sm90
