// The recording LoopProbe of the profiling build (FASTATTN_LOOP_PROBES; included by
// loop_probes.cuh, never directly). Thread 0 of each consumer warpgroup stamps the 32-bit clock
// into shared memory at each mark and turns an iteration's stamps into per-region cycles at its
// last mark (kIterEnd); the sums go into g_probe_buffer after the run with one atomic per slot,
// and in the traced CTA the raw timestamps of the first kTraceIters iterations. The other threads
// skip the marks, and nothing of the probe lives in registers across the loop: kept there (every
// consumer thread summing alike), the sums and pointers made ptxas spill 180 bytes beside the
// deferred max (session 20), and the add at a mark inside the softmax 4 more. A spilling probed
// kernel is not the kernel it claims to measure (tests/profile/probed.rules forbids it).
//
// FASTATTN_PROBE_PV_SYNC adds seed 003's in-pipeline PV measurement: a wgmma_wait<0> right after
// the scores are ready, so the PV of the previous tile retires before the softmax starts (this
// kills the IntraWG overlap; measurement only). The wait's duration is the PV's residual time on
// the tensor cores after the QK.
#pragma once

#include <cstdint>

#include "cuda/common/special_regs.cuh"
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

// One consumer warpgroup's probe state for the current run of blocks, owned by its thread 0.
struct ProbeState {
  uint32_t stamp[kMarkCount];  // the 32-bit clock at each mark of the current iteration
  uint32_t pv_sync;            // PV-sync build: when the added wait returned
  uint32_t last;               // the clock at the end of the last iteration (at first: the creation)
  uint32_t sums[kSlotCount];   // cycles per region (32-bit: a run is far below 2^32 cycles per region)
  long long start;             // clock64 at the creation: widens the 32-bit stamps of the trace
  int iters;                   // loop iterations so far
  bool traced;                 // this warpgroup of this run records raw timestamps
};
static __shared__ ProbeState s_probe[kWarpgroups];

class LoopProbe {
 public:
  // The kernel's warpgroup index is wg() here too (derived, not kept).
  __device__ __forceinline__ LoopProbe(int /*wg*/) {
    if (!leader()) return;
    const long long now = cuda_backend::sreg_clock64();
    const int wg = LoopProbe::wg();
    ProbeState& st = s_probe[wg];
#pragma unroll
    for (int s = 0; s < kSlotCount; ++s) st.sums[s] = 0;
    st.last = uint32_t(now);
    st.start = now;
    st.iters = 0;
    ProbeTrace& tr = g_probe_buffer.trace;
    st.traced = in_traced_cta() && tr.seen[wg] == tr.skip;
    if (st.traced) {
      tr.start[wg] = now;
      if (wg == 0) tr.smid = cuda_backend::sreg_smid();
    }
  }

  // `m` is a constant at every call site once inlined: a mark costs thread 0 a clock read and a
  // shared-memory store; the iteration's last mark (and the epilogue's) adds up the regions.
  __device__ __forceinline__ void mark(Mark m) {
    if (leader()) {
      ProbeState& st = s_probe[wg()];
      st.stamp[m] = cuda_backend::sreg_clock32();
      if (m == kIterEnd) end_iteration(st);
      if (m == kEpilogueEnd) {
        st.sums[kEpilogueEnd] += st.stamp[kEpilogueEnd] - st.last;
        if (st.traced) g_probe_buffer.trace.end[wg()] = widen(st, st.stamp[kEpilogueEnd]);
      }
    }
    if constexpr (kPvSyncBuild) {
      if (m == kScoresReady) {
        sm90::wgmma_wait<0>();  // every thread: the wait is warpgroup-wide
        if (leader()) s_probe[wg()].pv_sync = cuda_backend::sreg_clock32();
      }
    }
  }

  // After the epilogue. Runs that ran no loop iteration are left out (nothing steady to measure).
  __device__ __forceinline__ void finish() {
    if (!leader()) return;
    const ProbeState& st = s_probe[wg()];
    if (st.iters == 0) return;
    ProbeTotals& tot = g_probe_buffer.totals;
#pragma unroll
    for (int s = 0; s < kSlotCount; ++s) atomicAdd(&tot.cycles[wg()][s], (unsigned long long)st.sums[s]);
    atomicAdd(&tot.iterations[wg()], (unsigned long long)st.iters);
    atomicAdd(&tot.tiles[wg()], 1ull);
    if (in_traced_cta()) {  // only this thread touches its warpgroup's trace fields
      if (st.traced) g_probe_buffer.trace.iterations[wg()] = st.iters;
      ++g_probe_buffer.trace.seen[wg()];
    }
  }

 private:
  // The iteration's regions from its stamps: region m runs from the mark before m to m (the
  // PV-sync wait splits the one after kScoresReady); kIterBegin's region is the back edge, or in
  // the first iteration the prologue.
  __device__ __forceinline__ void end_iteration(ProbeState& st) const {
    const bool first = st.iters++ == 0;
    st.sums[first ? kSlotPrologue : kIterBegin] += st.stamp[kIterBegin] - st.last;
    uint32_t prev = st.stamp[kIterBegin];
#pragma unroll
    for (int m = kIterBegin + 1; m <= kIterEnd; ++m) {
      if (kPvSyncBuild && m == kScoresReady + 1) {
        st.sums[kSlotPvSync] += st.pv_sync - prev;
        prev = st.pv_sync;
      }
      st.sums[m] += st.stamp[m] - prev;
      prev = st.stamp[m];
    }
    st.last = st.stamp[kIterEnd];
    if (st.traced && st.iters <= kTraceIters) {
      ProbeTrace& tr = g_probe_buffer.trace;
#pragma unroll
      for (int m = kIterBegin; m <= kIterEnd; ++m) tr.marks[wg()][st.iters - 1][m] = widen(st, st.stamp[m]);
      if (kPvSyncBuild) tr.pv_sync[wg()][st.iters - 1] = widen(st, st.pv_sync);
    }
  }

  __device__ __forceinline__ static bool leader() { return threadIdx.x % 128 == 0; }
  // The consumer warpgroup, as the kernel numbers it (warpgroup 0 is the producer's): derived at
  // each use rather than kept in a register across the loop.
  __device__ __forceinline__ static int wg() { return int(threadIdx.x / 128) - 1; }
  __device__ __forceinline__ static bool in_traced_cta() {
    const ProbeTrace& tr = g_probe_buffer.trace;
    return int(blockIdx.x) == tr.block[0] && int(blockIdx.y) == tr.block[1] && int(blockIdx.z) == tr.block[2];
  }
  // A 32-bit stamp as clock64: the traced run lasts far below 2^32 cycles past its start.
  __device__ __forceinline__ static long long widen(const ProbeState& st, uint32_t t) {
    return st.start + (long long)(t - uint32_t(st.start));
  }
};

}  // inline namespace
}  // namespace fastattn::prof
