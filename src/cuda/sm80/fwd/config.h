// The Ampere forward's tile shapes (FA2's for A100): 128 query rows per CTA on 4 warps, each warp
// 32 rows as two m16 tiles, so that every K / V fragment loaded with ldmatrix feeds two mma.sync.
// Q stays in smem (its A fragments are read again every block: registers hold S and O only). K / V:
// kStages >= 2, a ring of K+V stages filled by cp.async kStages - 1 blocks ahead; kStages = 1, FA2's
// order with one K and one V buffer (V_i loads under QK_i and the softmax, K_{i+1} under PV_i).
//   d  64: 128 keys a block (S 2 x 64 + O 2 x 32 floats a thread), 2-stage ring: 16 + 2 x 32 = 80 KB
//   d 128:  64 keys a block (S 2 x 32 + O 2 x 64 floats a thread), FA2's order: 32 + 16 + 16 = 64 KB
// With 255 registers a thread (both), 2 CTAs fit an SM's 64K registers: 160 / 128 KB of the A100's
// 164 KB (d 128's ring would take 96 KB, one CTA, one warp a scheduler); sm_86 / 89 (99 KB) hold one.
// d 128 also has the ring (32 + 2 x 32 = 96 KB), taken where it fits as many CTAs as FA2's order
// (sm_86 / 89: one; an H100 running the PTX: two): there the softmax can overlap PV (api.h).
#pragma once

namespace fastattn::sm80 {

template <int D, int BN, int Stages = 2>
struct Sm80FwdConfig {
  static_assert(D % 64 == 0, "the smem swizzle XORs 8 chunks of 16 bytes: a row of at least 64 columns");
  static constexpr int kHeadDim = D;
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = BN;
  static constexpr int kStages = Stages;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kBlockM / (16 * kWarps);  // m16 tiles per warp
  static constexpr int kChunks = D / 8;                     // 16-byte chunks per row
  static constexpr int kRowBytes = 2 * D;
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKVBytes = kBlockN * kRowBytes;      // one K (or V) block
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKVBytes;
};

template <int D>
struct Sm80DefaultConfig;
template <>
struct Sm80DefaultConfig<64> {
  using type = Sm80FwdConfig<64, 128>;
  using decode = Sm80FwdConfig<64, 64>;
};
template <>
struct Sm80DefaultConfig<128> {
  using type = Sm80FwdConfig<128, 64, 1>;  // FA2's order; the ring twin below (api.h: ring_at_d128)
  using ring = Sm80FwdConfig<128, 64, 2>;
  using decode = Sm80FwdConfig<128, 32, 2>;
};

}  // namespace fastattn::sm80
