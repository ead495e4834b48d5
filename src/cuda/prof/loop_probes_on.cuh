// The recording LoopProbe of the profiling build (FASTATTN_LOOP_PROBES; included by
// loop_probes.cuh, never directly). Every thread of a consumer warpgroup reads the clock at each
// mark and sums the cycles per region in registers (uniform code, no divergence); only thread 0 of
// the warpgroup writes: its sums go into g_probe_buffer at the end with one atomic per slot, and
// in the traced CTA its raw timestamps of the first kTraceIters iterations.
//
// FASTATTN_PROBE_PV_SYNC adds seed 003's in-pipeline PV measurement: a wgmma_wait<0> right after
// the scores are ready, so the PV of the previous tile retires before the softmax starts (this
// kills the IntraWG overlap; measurement only). The wait's duration is the PV's residual time on
// the tensor cores after the QK.
#pragma once

#include <cstdint>

#include "cuda/common/fwd_params.h"
#include "cuda/prof/probe_layout.h"
#include "cuda/sm90/prim/wgmma.cuh"

namespace fastattn::prof {

// Each variant gets its own inline namespace, so the probe types (and through them the probed
// kernels) of the two builds never share a mangled name with each other or the default build.
#ifdef FASTATTN_PROBE_PV_SYNC
inline namespace probes_pv_sync {
constexpr bool kPvSyncBuild = true;
#else
inline namespace probes_on {
constexpr bool kPvSyncBuild = false;
#endif

// One buffer per translation unit (internal linkage): the host code of the same unit clears it
// and reads it back with cudaMemcpy{To,From}Symbol around its launches.
static __device__ ProbeBuffer g_probe_buffer;

// The memory clobber keeps loads and stores on their side of the probe; arithmetic may still be
// scheduled across it, so region boundaries are exact only at waits and barriers.
__device__ __forceinline__ long long probe_clock() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ int probe_smid() {
  int id;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
  return id;
}

class LoopProbe {
 public:
  __device__ __forceinline__ LoopProbe(const cuda_backend::FwdParams&, int wg) : wg_(wg) {
    const long long now = probe_clock();
    last_ = uint32_t(now);
#pragma unroll
    for (int s = 0; s < kSlotCount; ++s) sum_[s] = 0;
    ProbeTrace& tr = g_probe_buffer.trace;
    in_traced_cta_ = threadIdx.x % 128 == 0 && int(blockIdx.x) == tr.block[0] &&
                     int(blockIdx.y) == tr.block[1] && int(blockIdx.z) == tr.block[2];
    if (in_traced_cta_ && tr.seen[wg] == tr.skip) {
      trace_ = &tr.marks[wg][0][0];
      tr.start[wg] = now;
      if (wg == 0) tr.smid = probe_smid();
    }
  }

  // `m` is a constant at every call site once inlined, so sum_ stays in registers and a mark
  // costs a clock read, an add and, in the traced tile only, a store.
  __device__ __forceinline__ void mark(Mark m) {
    const long long now = probe_clock();
    const uint32_t t = uint32_t(now);  // 32-bit deltas: a region is far below 2^32 cycles
    if (m == kIterBegin) {  // selects, not a run-time index (that would put sum_ in local memory)
      const bool first = iters_ == 0;
      sum_[kSlotPrologue] += first ? t - last_ : 0u;
      sum_[kIterBegin] += first ? 0u : t - last_;
      ++iters_;
      row_ = trace_ != nullptr && iters_ <= kTraceIters ? trace_ + (iters_ - 1) * kLoopMarks : nullptr;
    } else {
      sum_[m] += t - last_;
    }
    last_ = t;
    if (m == kEpilogueEnd) {
      if (trace_ != nullptr) g_probe_buffer.trace.end[wg_] = now;
    } else if (row_ != nullptr) {
      row_[m] = now;
    }
    if constexpr (kPvSyncBuild) {
      if (m == kScoresReady) {
        sm90::wgmma_wait<0>();
        const long long after = probe_clock();
        sum_[kSlotPvSync] += uint32_t(after) - last_;
        last_ = uint32_t(after);
        if (row_ != nullptr) g_probe_buffer.trace.pv_sync[wg_][iters_ - 1] = after;
      }
    }
  }

  // After the epilogue. Tiles that ran no loop iteration are left out (nothing steady to measure).
  __device__ __forceinline__ void finish() {
    if (threadIdx.x % 128 != 0 || iters_ == 0) return;
    ProbeTotals& tot = g_probe_buffer.totals;
#pragma unroll
    for (int s = 0; s < kSlotCount; ++s) atomicAdd(&tot.cycles[wg_][s], (unsigned long long)sum_[s]);
    atomicAdd(&tot.iterations[wg_], (unsigned long long)iters_);
    atomicAdd(&tot.tiles[wg_], 1ull);
    if (in_traced_cta_) {  // only this thread touches its warpgroup's trace fields
      if (trace_ != nullptr) g_probe_buffer.trace.iterations[wg_] = iters_;
      ++g_probe_buffer.trace.seen[wg_];
    }
  }

 private:
  uint32_t sum_[kSlotCount];
  uint32_t last_;
  int iters_ = 0;
  int wg_;
  bool in_traced_cta_;
  long long* trace_ = nullptr;  // non-null in thread 0 of each warpgroup of the traced tile only
  long long* row_ = nullptr;    // this iteration's row of trace_, while within kTraceIters
};

}  // inline namespace
}  // namespace fastattn::prof
