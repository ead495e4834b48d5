// The split-D forward's fixed shape (docs/notes/splitd-sm90.md): 64 query rows a CTA, key blocks of
// 128 split by keys between the two consumer warpgroups (64 each, over the whole d_qk), each
// warpgroup owning a 256-column slice of O, and one smem ring of 8 KB chunks (64 keys x 64 columns:
// one 128-byte-swizzle atom) that brings each key block's K chunks (2 x d_qk / 64) and then V
// chunks (the CTA's 512 columns of d_v, both key halves). The head dims are run-time counts of
// atoms: nothing here depends on them.
#pragma once

namespace fastattn::sm90 {

struct SplitDConfig {
  static constexpr int kRows = 64;              // query rows per CTA, shared by both warpgroups
  static constexpr int kHalfKeys = 64;          // keys per warpgroup and block (S: 32 registers, P: 16)
  static constexpr int kKeys = 2 * kHalfKeys;   // keys per block
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kSliceAtoms = 4;         // O columns per warpgroup: 4 x 64 = 256 (128 registers)
  static constexpr int kPairAtoms = kSliceAtoms * kConsumerWarpgroups;  // d_v atoms per CTA (512 columns)
  static constexpr int kMaxAtoms = 16;          // d_qk, d_v <= 1024
  static constexpr int kChunkBytes = 64 * 128;  // one atom of 64 rows: a Q atom, a K / V chunk, a P half
  // Q (up to 128 KB), the ring, both P halves (16 KB) and the row exchange within sm_90's 227 KB. A
  // warpgroup holds at most 2 of its K chunks (QK) or 2 quarters' V (4 chunks, PV) at once. The
  // ring takes kRingSlots chunks after Q's 16 and, where d_qk < 1024, Q's unused chunks before them:
  // kRingSlots + kMaxAtoms - d_qk / 64 slots (a run-time count, SplitDParams::ring_slots).
  static constexpr int kRingSlots = 10;
  static constexpr int kChunks = kMaxAtoms + kRingSlots;  // Q and the ring share one array of chunks
  static constexpr int kMaxRingSlots = kChunks - 1;       // d_qk >= 64
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;  // named barriers 1-3
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;     // 24 x 128 + 240 x 256 = 64512 of 65536
};

}  // namespace fastattn::sm90
