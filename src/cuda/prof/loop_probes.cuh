// clock64 probes at the region boundaries of the forward K-loop (issue #6). Off by default: with
// FASTATTN_LOOP_PROBES undefined, LoopProbe is empty and every mark() compiles to nothing, so the
// default kernels' SASS does not change. The profiling build defines it (see docs/profiling.md).
#pragma once

#include "cuda/prof/probe_layout.h"

#ifdef FASTATTN_LOOP_PROBES
#include "cuda/prof/loop_probes_on.cuh"
#else

namespace fastattn::prof {

struct LoopProbe {
  __device__ __forceinline__ LoopProbe(int /*wg*/) {}
  __device__ __forceinline__ void mark(Mark) {}
  __device__ __forceinline__ void finish() {}
};

}  // namespace fastattn::prof

#endif
