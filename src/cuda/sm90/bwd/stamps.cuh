// Per-CTA timestamps of the backward main kernel (stamps.h says what each holds). Off by default:
// without FASTATTN_BWD_STAMPS kBwdStamps is false, every call site is `if (kBwdStamps && ..)` and
// the kernels do not change (SASS-identical; docs/notes/bwd-sm90.md, session 32). A build with
// -DFASTATTN_BWD_STAMPS (CUDA and C++ flags alike; CMake option FASTATTN_BWD_STAMPS) records, for
// each CTA (blockIdx.x < kBwdStampCtas) of the last backward launch of its translation unit, the SM
// clock at each stamp; clear_bwd_stamps / read_bwd_stamps (launch.cuh) zero and copy them.
#pragma once

#include "cuda/common/special_regs.cuh"
#include "cuda/sched/tile_order.cuh"  // cta_index
#include "cuda/sm90/bwd/stamps.h"

namespace fastattn::sm90 {

#ifdef FASTATTN_BWD_STAMPS
inline constexpr bool kBwdStamps = true;
static __device__ unsigned long long g_bwd_stamps[kBwdStampCtas][kBwdStampWords];

// The SM clock (cuda_backend::sreg_clock64) is read in program order after every earlier memory
// operation and wait of this thread (a wait that a value depends on has passed once the
// instruction using it issued). The CTA's index is read afresh at each stamp (cta_index): with
// blockIdx.x ptxas keeps the row's address live across the loops, which the producer warpgroup's
// 24 registers do not hold (the ring writer spilled 8 B).
__device__ __forceinline__ void bwd_stamp_word(int word, unsigned long long value) {
  const unsigned cta = unsigned(cuda_backend::cta_index());
  if (cta < kBwdStampCtas) g_bwd_stamps[cta][word] = value;
}
__device__ __forceinline__ void bwd_stamp(BwdStamp which) {
  const unsigned long long c = cuda_backend::sreg_clock64();
  if (which == kBsStart) {
    bwd_stamp_word(kBwGlobalStart, cuda_backend::sreg_globaltimer());
    bwd_stamp_word(kBwSmid, unsigned(cuda_backend::sreg_smid()));
  }
  if (which == kBsDkvStored) bwd_stamp_word(kBwGlobalEnd, cuda_backend::sreg_globaltimer());
  bwd_stamp_word(which, c);
}
// Step `step` of the tile's walk (in the role's own order); later steps are not recorded. The
// count restarts at each tile: with paired key blocks the consumers' and the writer's stamps of
// the second tile overwrite the first's (the producer stamps only the first tile's steps).
__device__ __forceinline__ void bwd_stamp_step(BwdStepStamp which, int step) {
  const unsigned long long c = cuda_backend::sreg_clock64();
  if (step < kBwdStampSteps) bwd_stamp_word(kBsFixed + kBwdStepStamps * step + which, c);
}
// The writer's job kind of step `step` (2 bits a step).
__device__ __forceinline__ void bwd_stamp_job(int step, int job) {
  const unsigned cta = unsigned(cuda_backend::cta_index());
  if (step < kBwdStampSteps && cta < kBwdStampCtas)
    g_bwd_stamps[cta][kBwJobs] |= (unsigned long long)(job & 3) << (2 * step);
}
#else
inline constexpr bool kBwdStamps = false;
__device__ __forceinline__ void bwd_stamp_word(int, unsigned long long) {}
__device__ __forceinline__ void bwd_stamp(BwdStamp) {}
__device__ __forceinline__ void bwd_stamp_step(BwdStepStamp, int) {}
__device__ __forceinline__ void bwd_stamp_job(int, int) {}
#endif

}  // namespace fastattn::sm90
