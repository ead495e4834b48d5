// Tile shapes of the Hopper backward, per head dim. Masks, seqlens, GQA ratio, scale, softcap and
// deterministic mode are run-time arguments.
#pragma once

namespace fastattn::sm90 {

// One CTA per key block of 128 (two consumer warpgroups of 64 keys each, swap-AB: S^T, dP^T, dS^T
// have keys as rows), over q-blocks of 64 rows streamed through a 2-stage ring. d = 128 on 240
// registers: dK + dV 128, S^T + dP^T 64, P + dS packed 32. d = 192 / 256 do not fit this shape
// (dK + dV alone are 192 / 256 registers): they need 64-key warpgroups split over d, or dK/dV
// through smem (docs/notes/bwd-sm90.md).
template <int D>
struct BwdConfig {
  static_assert(D == 64 || D == 96 || D == 128, "the backward's tile holds d <= 128");
  static constexpr int kHeadDim = D;
  static constexpr int kBlockM = 64;     // q rows per step
  static constexpr int kBlockN = 128;    // keys per CTA
  static constexpr int kStages = 2;      // Q / dO ring depth
  static constexpr int kAtoms = (D + 63) / 64;
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKAtomBytes = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  static constexpr int kKBytes = kAtoms * kKAtomBytes;
  // dQ = dS K: each warpgroup takes whole 64-column atoms of K where it can (a wgmma B operand
  // cannot cross an atom boundary mid-N): d 128 64 + 64, d 96 64 + 32, d 64 32 + 32 (mid-atom).
  static constexpr int kDqCols0 = D == 96 ? 64 : D / 2;
  static constexpr int kDqCols1 = D - kDqCols0;
  static constexpr int kThreads = 384;   // producer warpgroup + two consumer warpgroups
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
};

}  // namespace fastattn::sm90
