// Tile shapes of the Hopper backward, per head dim. Masks, seqlens, GQA ratio, scale, softcap and
// deterministic mode are run-time arguments.
#pragma once

namespace fastattn::sm90 {

// d <= 128: one CTA per key block of 128 (two consumer warpgroups of 64 keys each, swap-AB: S^T,
// dP^T, dS^T have keys as rows), over q-blocks of 64 rows streamed through a 2-stage ring. d = 128
// on 240 registers: dK + dV 128, S^T + dP^T 64, P + dS packed 32.
// d > 128 (kSplitD): dK + dV of 64 keys would be 192 / 256 registers, so a CTA holds 64 keys and
// both warpgroups share them: S^T / dP^T split on the q rows (32 each), P^T and dS^T through smem,
// dK / dV / dQ split on the head dim by whole atoms (docs/notes/bwd-sm90.md).
template <int D>
struct BwdConfig {
  static_assert(D == 64 || D == 96 || D == 128 || D == 192 || D == 256, "backward head dims: 64, 96, 128, 192, 256");
  static constexpr int kHeadDim = D;
  static constexpr bool kSplitD = D > 128;
  static constexpr int kBlockM = 64;                   // q rows per step
  static constexpr int kBlockN = kSplitD ? 64 : 128;   // keys per CTA
  static constexpr int kStages = 2;                    // Q / dO ring depth
  static constexpr int kAtoms = (D + 63) / 64;
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKAtomBytes = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  static constexpr int kKBytes = kAtoms * kKAtomBytes;
  // Warpgroup w's share of S^T / dP^T: keys from w * kWgKeyStride, q rows from w * kWgQStride.
  static constexpr int kWgKeyStride = kSplitD ? 0 : 64;
  static constexpr int kWgQStride = kSplitD ? 32 : 0;
  static constexpr int kSdpCols = kSplitD ? 32 : 64;   // q rows per warpgroup: the N of S^T, dP^T
  // dK / dV columns of warpgroup 0 and 1 (d <= 128: all of d, for its own keys; else the atoms
  // from 0 and from kDkvCols0), and the accumulator size that holds the larger share.
  static constexpr int kDkvCols0 = kSplitD ? 128 : D;
  static constexpr int kDkvCols1 = kSplitD ? D - 128 : D;
  static constexpr int kDkvColsMax = kDkvCols0;
  // dQ = dS K: each warpgroup takes whole 64-column atoms of K where it can (a wgmma B operand
  // cannot cross an atom boundary mid-N): d 128 64 + 64, d 96 64 + 32, d 64 32 + 32 (mid-atom);
  // d 192 64 + 128 (the reverse of its dK / dV split, to even the warpgroups' MMA work).
  static constexpr int kDqCols0 = D == 96 || D == 192 ? 64 : D / 2;
  static constexpr int kDqCols1 = D - kDqCols0;
  // The end of a step, and dQ into the accumulator. d 128 (kDqBeforeDk): dQ = dS K issued before
  // dK += dS^T Q, staged in smem buffers of its own while dK runs and bulk-added by a writer warp
  // (deterministic mode: in turn). d 64 / 96: dK issued before the dS^T barrier, dQ last, added by
  // vector atomics from registers (deterministic mode: staged for the writer warp). d > 128: bulk
  // reduce-adds staged in the step's Q / dO stage, which the fp32 dQ fills exactly (a buffer of its
  // own does not fit). By measurement (notes): the atomics held the consumer warps ~15% of their
  // time at d 128 and took as long as the rest of the step at d > 128; at d 64 the d 128 scheme
  // lost 5-11%.
  static constexpr bool kDqBeforeDk = D == 128;
  static constexpr bool kDqInStage = kSplitD;
  // Deterministic mode's CTA order: key blocks in chunks of this many per head (2048 keys).
  static constexpr int kDetChunk = 2048 / kBlockN;
  static constexpr int kThreads = 384;   // producer warpgroup + two consumer warpgroups
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
};

}  // namespace fastattn::sm90
