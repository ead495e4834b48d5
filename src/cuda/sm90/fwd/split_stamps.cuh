// Timestamps per CTA of the split-KV forward kernel, for measuring where a short split's fixed
// time goes (issue #30, decode at batch 1). Off by default: without FASTATTN_SPLIT_STAMPS every
// split_stamp() compiles to nothing and the kernels do not change. A build with
// -DFASTATTN_SPLIT_STAMPS (CUDA and C++ flags alike) records, for each CTA of the last split launch
// of its translation unit, the global timer at its start and the SM clock at each stamp;
// read_split_stamps (launch_split.cuh) copies them out (tests/gpu/kvcache_bench.cpp, `stamps`).
#pragma once

#include "cuda/common/special_regs.cuh"
#include "cuda/sm90/fwd/split_stamps.h"

namespace fastattn::sm90 {

#ifdef FASTATTN_SPLIT_STAMPS
static __device__ unsigned long long g_split_stamps[kStampCtas][kStampWords];

template <class Cfg>
__device__ __forceinline__ void split_stamp(SplitStamp which) {
  if constexpr (Cfg::kSplit) {
    if (blockIdx.x >= kStampCtas) return;
    const unsigned long long c = clock64();
    if (which == kStampStart) g_split_stamps[blockIdx.x][kStamps] = cuda_backend::sreg_globaltimer();
    g_split_stamps[blockIdx.x][which] = c;
  }
}
#else
template <class Cfg>
__device__ __forceinline__ void split_stamp(SplitStamp) {}
#endif

}  // namespace fastattn::sm90
