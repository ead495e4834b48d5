// Tile shapes of the Hopper forward, per head dim. Only these change the kernel's layout; masks,
// seqlens, GQA ratio, scale and softcap are run-time arguments.
#pragma once

namespace fastattn::sm90 {

// Keys per KV tile. d = 64: 192 (fewer row reductions, O rescales and barrier hand-offs per score;
// FA3's choice too). d > 128: 80 keep S + O + P within 240 registers and K + V (2 stages) + Q
// within 227 KB. Launch-time alternatives (fwd_launch.cuh): d = 64 short keys 128 with a 3-deep ring;
// d = 128 long unmasked rows 128 with a 3-deep ring or 176; d = 128 narrow windows 64 with 4 stages.
constexpr int default_block_n(int d) { return d <= 64 ? 192 : d <= 128 ? 128 : 80; }

// Consumer warpgroups, 64 query rows each: 2 (a 128-row tile), or 3 (192 rows) where the softmax
// is as long as a warpgroup's GEMMs (d = 64: exp count and MMA cycles per score are equal) and
// needs two other warpgroups' GEMMs to hide under (FA3's choice at d = 64). Three warpgroups leave
// 160 registers each: S + P + O of a 64 x 128 x 64 tile fit, 192 keys do not.
template <int D, int N = default_block_n(D), int Stages = 2, int ConsumerWGs = 2>
struct FwdConfig {
  static_assert(ConsumerWGs == 2 || ConsumerWGs == 3, "two or three consumer warpgroups");
  static constexpr int kHeadDim = D;
  static constexpr int kConsumerWarpgroups = ConsumerWGs;
  static constexpr int kBlockM = 64 * ConsumerWGs;
  static constexpr int kBlockN = N;
  static constexpr int kStages = Stages;             // K/V smem ring depth
  static constexpr int kAtoms = (D + 63) / 64;       // 64-column swizzle atoms per row
  static constexpr int kQAtomBytes = kBlockM * 128;
  static constexpr int kKVAtomBytes = kBlockN * 128;
  // Two Q buffers let a consumer issue the next tile's first QK beside the current tile's last PV
  // (no per-tile prologue or epilogue bubble); d = 256 has no room for the second (Q 64 KB + the
  // K/V ring 160 KB), so there a tile ends before the next begins.
  static constexpr int kQBytes = kAtoms * kQAtomBytes;
  static constexpr int kRingBytes = 2 * kStages * kAtoms * kKVAtomBytes;
  // 227 KB of dynamic smem per block; 1 KB of it aligns the base, 1 KB holds the barriers.
  static constexpr int kQBuffers = 2 * kQBytes + kRingBytes + 2048 <= 227 * 1024 ? 2 : 1;
  // InterWG ping-pong pays where softmax is a large share of the loop (d <= 128: +5..20% on H100,
  // 2026-11-21); at d = 256 with 64-wide KV tiles it cost up to 25% (docs/notes/fwd-sm90.md).
  static constexpr bool kPingPong = D <= 128;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  // setmaxnreg budgets: 24 x 128 + 240 x 256 = 64512 of the SM's 65536 registers (2 consumers),
  // 24 x 128 + 160 x 384 = 64512 (3 consumers).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = ConsumerWGs == 2 ? 240 : 160;
  // Two warpgroups (240 registers) can carry a wait inside another phase: V's wait between the
  // QK and PV issues, and the PV wait between the softmax rows (fwd_kernel.cuh). Three (160
  // registers) spilled with either (4 and 28-54 bytes): there each wait keeps its own place.
  static constexpr bool kWaitsOverlapped = ConsumerWGs == 2;
  // The blocks that need no mask, softcap or tile bookkeeping run in a loop body of their own
  // (fwd_kernel.cuh): d128 causal +1%, s4k unmasked +5% (H100 A/B, 2026-11-22). Three warpgroups
  // (d = 64) measured 1.5-3% slower with it, and keep the one generic body.
  static constexpr bool kPlainBody = ConsumerWGs == 2;
};

}  // namespace fastattn::sm90
