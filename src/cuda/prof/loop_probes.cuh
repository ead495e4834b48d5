// clock64 probes at the region boundaries of the forward K-loop (issue #6). Off by default: with
// FASTATTN_LOOP_PROBES undefined, LoopProbe is empty and every mark() compiles to nothing, so the
// default kernels' SASS does not change. The profiling build defines it (see docs/profiling.md).
#pragma once

#include "cuda/common/fwd_params.h"

namespace fastattn::prof {

// Points of one consumer warpgroup's steady-state iteration, in program order. A region is the
// time between one mark and the next; kEpilogueEnd closes the epilogue after the last iteration.
enum Mark : int {
  kIterBegin = 0,  // top of the iteration
  kTilesReady,     // K(n) and V(n+1) mbarrier waits returned
  kTurnTaken,      // ping-pong: this warpgroup's turn to issue
  kIssued,         // QK(n) and PV(n+1) wgmmas issued, turn handed over
  kScoresReady,    // wgmma_wait<1>: S(n) in registers
  kMasked,         // softcap + keep-bit mask applied
  kSoftmaxDone,    // online softmax step done
  kPvDone,         // wgmma_wait<0>: PV(n+1) retired
  kIterEnd,        // O rescaled, P converted
  kEpilogueEnd,    // output and LSE stored
  kMarkCount
};

#ifndef FASTATTN_LOOP_PROBES
struct LoopProbe {
  __device__ __forceinline__ LoopProbe(const cuda_backend::FwdParams&, int /*wg*/) {}
  __device__ __forceinline__ void mark(Mark) {}
  __device__ __forceinline__ void finish() {}
};
#endif

}  // namespace fastattn::prof
