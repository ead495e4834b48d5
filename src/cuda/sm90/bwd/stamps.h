// What the backward main kernel's per-CTA timestamps hold (stamps.cuh), for the device side and the
// host that reads them (tests/gpu/bwd_stamps_bench.cpp). Issue #29's window target: where a ring CTA's
// ~24 us go (docs/notes/bwd-sm90.md, session 32).
#pragma once

namespace fastattn::sm90 {

// SM clocks (clock64) per CTA. Roles: thread 0 (set-up, then the producer), thread 32 (the dQ
// writer: the ring's leader lane, or the plain kernel's bulk-add writer), thread 128 (consumer
// warpgroup 0's first thread).
enum BwdStamp : int {
  kBsStart,       // thread 0: kernel entry
  kBsBarInit,     // thread 0: mbarriers initialised and fenced
  kBsDepWait,     // thread 0: past griddepcontrol.wait (the preprocess's writes visible)
  kBsTicket,      // thread 0: the CTA's item known (the ticket's atomic returned, in smem)
  kBsSynced,      // thread 0: past the set-up's __syncthreads
  kBsTile,        // thread 0: its tile built (make_bwd_tile)
  kBsRegsGiven,   // thread 0: the producer warpgroup's registers given back (setmaxnreg)
  kBsKvIssued,    // producer: K and V's TMA issued
  kBsProdEnd,     // producer: every load of the CTA issued
  kBsRegsClaimed, // consumer: its registers claimed (setmaxnreg)
  kBsKvLanded,    // consumer: K and V landed (kv_full)
  kBsLastStep,    // consumer: its last step done (dQ staged, the stage released)
  kBsEpiMet,      // consumer: both warpgroups past their last MMA (the epilogue's barrier)
  kBsDkvStored,   // consumer: dK / dV staged and this thread's global stores issued
  kBsWriterEnd,   // writer: past its last job (ring: the storers released; plain: its adds landed)
  kBsFixed,
};
// Per step (the first kBwdStampSteps of a tile's walk: bwd_stamp_step), at kBsFixed + kBwdStepStamps * step.
enum BwdStepStamp : int {
  kBsQIssued,   // producer: the step's Q / dO / lse / D issued (after waiting for a free stage)
  kBsQLanded,   // consumer: the step's Q / dO stage landed (q_full)
  kBsSDone,     // consumer: S^T retired (wgmma wait; dP^T may still run)
  kBsDsMet,     // consumer: dS^T stored, both warpgroups met (kBwdDsBar)
  kBsStepEnd,   // consumer: dQ staged for the writer, the stage released (q_empty)
  kBsStaged,    // writer: both warpgroups' dQ staged (dq_full)
  kBsSlotFree,  // writer (ring, 2+ visitors): the slot's last earlier user done
  kBsAdded,     // writer: its bulk reduce-add landed (ring: wait_all; plain: read out of smem)
  kBsCounted,   // writer (ring): the arrival counted (atom.acq_rel returned)
  kBsLoaded,    // writer (ring, last visitor): the slot loaded back into the staging buffer
  kBsStored,    // writer (ring, sole or last): the storers' dq stores issued, the slot cleared
  kBsReleased,  // writer: the staging buffer given back (dq_empty)
  kBwdStepStamps,
};
inline constexpr int kBwdStampSteps = 4;
// Words after the clocks: the global timer (ns) at kBsStart and at kBsDkvStored (the host derives the
// SM clock's rate from them), %smid, the CTA's item (ticket), its step count, its writer's job kinds
// (2 bits a step: RingJob, dq.cuh; 0 where the step had none recorded).
enum BwdStampWord : int {
  kBwGlobalStart = kBsFixed + kBwdStampSteps * kBwdStepStamps,
  kBwGlobalEnd,
  kBwSmid,
  kBwItem,
  kBwSteps,
  kBwJobs,
  kBwdStampWords,
};
inline constexpr int kBwdStampCtas = 4096;  // CTAs past this (blockIdx.x) record nothing

}  // namespace fastattn::sm90
