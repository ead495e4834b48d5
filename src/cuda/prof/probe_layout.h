// What the forward loop probes measure (issue #6), as plain data: the probe points of one
// consumer warpgroup's K-loop and the device buffer they fill. Shared by the probed kernel and
// the host code that reads the buffer back (no CUDA types).
#pragma once

namespace fastattn::prof {

// Points of one consumer warpgroup's steady-state iteration, in program order. A region is the
// time between one mark and the next; kEpilogueEnd closes the epilogue after the last iteration.
enum Mark : int {
  kIterBegin = 0,  // top of the iteration
  kTilesReady,     // K(n) mbarrier wait returned (ping-pong: the first warpgroup waits, the others pass)
  kTurnTaken,      // ping-pong: this warpgroup's turn to issue
  kIssued,         // QK(n) issued, V(n+1) waited for, PV(n+1) issued, turn handed over
  kScoresReady,    // wgmma_wait<1>: S(n) in registers
  kMasked,         // softcap + keep-bit mask applied
  kSoftmaxDone,    // online softmax step done (two warpgroups: row 0's exps; row 1's come after kPvDone)
  kPvDone,         // wgmma_wait<0>: PV(n+1) retired
  kIterEnd,        // O rescaled, P converted
  kEpilogueEnd,    // output and LSE stored
  kMarkCount
};

// Where cycles are summed. Slot m < kMarkCount holds the region that ends at mark m: slot
// kIterBegin is the loop back edge (kIterEnd to the next kIterBegin), slot kEpilogueEnd runs from
// the last kIterEnd through the last PV and the stores. Two slots have no closing mark of their own.
enum Slot : int {
  kSlotPrologue = kMarkCount,  // probe creation (before Q's wait and the first QK) to the first kIterBegin
  kSlotPvSync,                 // PV-sync build only: the wgmma_wait<0> added right after kScoresReady
  kSlotCount
};

constexpr int kWarpgroups = 2;        // consumer warpgroups per CTA
constexpr int kLoopMarks = kEpilogueEnd;  // marks inside one iteration (kIterBegin .. kIterEnd)
constexpr int kTraceIters = 16;       // iterations of the traced CTA kept with raw timestamps

// Sums over every tile (one consume() call: 128 query rows of one head) that ran at least one
// loop iteration, per consumer warpgroup, as seen by the warpgroup's thread 0. A CTA runs one tile,
// or several in a persistent grid.
struct ProbeTotals {
  unsigned long long cycles[kWarpgroups][kSlotCount];
  unsigned long long iterations[kWarpgroups];
  unsigned long long tiles[kWarpgroups];
};

// Raw clock64 values of one tile of one CTA (both warpgroups read the same SM clock), for the
// timeline. The host picks the CTA; in a persistent grid a CTA runs several tiles, and `skip` says
// how many of its tiles with loop iterations to pass before the one that is recorded.
struct ProbeTrace {
  int block[3];                  // host: blockIdx of the traced CTA
  int skip;                      // host: tiles to pass first
  int smid;                      // SM the traced CTA ran on; -1 when no CTA matched
  int seen[kWarpgroups];         // device: the CTA's tiles with loop iterations finished so far
  int iterations[kWarpgroups];   // loop iterations of the recorded tile (the first kTraceIters kept)
  long long start[kWarpgroups];  // probe creation, before the tile's first QK
  long long end[kWarpgroups];    // kEpilogueEnd
  long long marks[kWarpgroups][kTraceIters][kLoopMarks];
  long long pv_sync[kWarpgroups][kTraceIters];  // PV-sync build: when the added wait<0> returned
};

struct ProbeBuffer {
  ProbeTotals totals;
  ProbeTrace trace;
};

// Short names of the slots (JSON keys) and what each measures (table rows).
inline const char* slot_key(int slot) {
  static const char* const keys[kSlotCount] = {
      "loop_back_edge", "wait_kv",     "wait_turn", "issue_mma", "wait_qk", "mask",
      "softmax",        "wait_pv",     "rescale",   "epilogue",  "prologue", "pv_sync"};
  return slot >= 0 && slot < kSlotCount ? keys[slot] : "?";
}
inline const char* slot_label(int slot) {
  static const char* const labels[kSlotCount] = {
      "loop back edge",
      "wait K(n) tile (mbarrier)",
      "wait for the turn (ping-pong barrier)",
      "issue QK(n), wait V(n+1), issue PV(n+1)",
      "wait QK on the tensor cores (wait<1>)",
      "release K, softcap, keep-bit mask",
      "online softmax",
      "wait PV residual (wait<0>)",
      "release V, rescale O, convert P",
      "last PV + epilogue (per tile)",
      "prologue: Q, first QK + softmax (per tile)",
      "PV on the tensor cores (wait<0> moved up)"};
  return slot >= 0 && slot < kSlotCount ? labels[slot] : "?";
}

}  // namespace fastattn::prof
