// Per-CTA timestamps of the backward main kernel (stamps.h says what each holds). Off by default:
// without FASTATTN_BWD_STAMPS kBwdStamps is false, every call site is `if (kBwdStamps && ..)` and
// the kernels do not change (SASS-identical; docs/notes/bwd-sm90.md, session 32). A build with
// -DFASTATTN_BWD_STAMPS (CUDA and C++ flags alike; CMake option FASTATTN_BWD_STAMPS) records, for
// each CTA (blockIdx.x < kBwdStampCtas) of the last backward launch of its translation unit, the SM
// clock at each stamp; clear_bwd_stamps / read_bwd_stamps (launch.cuh) zero and copy them.
#pragma once

#include "cuda/sm90/bwd/stamps.h"

namespace fastattn::sm90 {

#ifdef FASTATTN_BWD_STAMPS
inline constexpr bool kBwdStamps = true;
static __device__ unsigned long long g_bwd_stamps[kBwdStampCtas][kBwdStampWords];

// The SM clock, read in program order after every earlier memory operation and wait of this thread
// (the clobber keeps the compiler from moving it over them; a wait that a value depends on has
// passed once the instruction using it issued).
__device__ __forceinline__ unsigned long long bwd_stamp_clock() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}
__device__ __forceinline__ unsigned long long bwd_stamp_globaltimer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  return ns;
}
// The CTA's index read afresh at each stamp (volatile): with blockIdx.x ptxas keeps the row's
// address live across the loops, which the producer warpgroup's 24 registers do not hold (the
// ring writer spilled 8 B).
__device__ __forceinline__ unsigned bwd_stamp_cta() {
  unsigned cta;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta));
  return cta;
}
__device__ __forceinline__ void bwd_stamp_word(int word, unsigned long long value) {
  const unsigned cta = bwd_stamp_cta();
  if (cta < kBwdStampCtas) g_bwd_stamps[cta][word] = value;
}
__device__ __forceinline__ void bwd_stamp(BwdStamp which) {
  const unsigned long long c = bwd_stamp_clock();
  if (which == kBsStart) {
    bwd_stamp_word(kBwGlobalStart, bwd_stamp_globaltimer());
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    bwd_stamp_word(kBwSmid, smid);
  }
  if (which == kBsDkvStored) bwd_stamp_word(kBwGlobalEnd, bwd_stamp_globaltimer());
  bwd_stamp_word(which, c);
}
// Step `step` of the tile's walk (in the role's own order); later steps are not recorded. The
// count restarts at each tile: with paired key blocks the consumers' and the writer's stamps of
// the second tile overwrite the first's (the producer stamps only the first tile's steps).
__device__ __forceinline__ void bwd_stamp_step(BwdStepStamp which, int step) {
  const unsigned long long c = bwd_stamp_clock();
  if (step < kBwdStampSteps) bwd_stamp_word(kBsFixed + kBwdStepStamps * step + which, c);
}
// The writer's job kind of step `step` (2 bits a step).
__device__ __forceinline__ void bwd_stamp_job(int step, int job) {
  const unsigned cta = bwd_stamp_cta();
  if (step < kBwdStampSteps && cta < kBwdStampCtas) g_bwd_stamps[cta][kBwJobs] |= (unsigned long long)(job & 3) << (2 * step);
}
#else
inline constexpr bool kBwdStamps = false;
__device__ __forceinline__ void bwd_stamp_word(int, unsigned long long) {}
__device__ __forceinline__ void bwd_stamp(BwdStamp) {}
__device__ __forceinline__ void bwd_stamp_step(BwdStepStamp, int) {}
__device__ __forceinline__ void bwd_stamp_job(int, int) {}
#endif

}  // namespace fastattn::sm90
