// The Ampere backward's tile (FA2's shape for d <= 128: one CTA per 128 keys, 8 warps, q-blocks of
// 64 rows streamed through a 2-stage ring). Each warp owns 16 keys for S^T = K Q^T, dP^T = V dO^T,
// dV += P^T dO and dK += dS^T Q, so P^T and dS^T go from the accumulator registers straight into the
// A operand of the next mma (no smem round trip); only dS^T is stored to smem, for dQ = dS K, which
// the warps split 4 (q rows) x 2 (head-dim halves). Registers a thread: dK + dV D (64 at d 64, 128
// at d 128), S^T + dP^T 32 + 32, dQ's part D / 4 (after S^T and dP^T are dead).
// Smem: K and V of the key block once, Q / dO / lse / D of two q-blocks, dS^T of one:
//   d  64: 16 + 16 + 2 x (8 + 8 + 0.5) + 16 = 81 KB (an sm_86 / 89 SM's 99 KB holds one CTA)
//   d 128: 32 + 32 + 2 x (16 + 16 + 0.5) + 16 = 145 KB (A100 / H100 only: sm_86 / 89 refused by name)
#pragma once

namespace fastattn::sm80 {

template <int D>
struct Sm80BwdConfig {
  static_assert(D == 64 || D == 128, "the sm80 backward has d 64 and 128");
  static constexpr int kHeadDim = D;
  static constexpr int kBlockN = 128;  // keys a CTA
  static constexpr int kBlockM = 64;   // q rows a step (the workspace's q-block: BwdParams::block_m)
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = 2;
  static constexpr int kKeysPerWarp = kBlockN / kWarps;  // 16: one m16 tile
  // Geometry of the D-wide tiles (Q, K, V, dO) for swz / load_rows (sm80/prim/smem_tile.cuh).
  static constexpr int kChunks = D / 8;
  static constexpr int kRowBytes = 2 * D;
  static constexpr int kKBytes = kBlockN * kRowBytes;  // K (and V)
  static constexpr int kQBytes = kBlockM * kRowBytes;  // one stage of Q (and of dO)
  static constexpr int kStatBytes = kBlockM * 4;       // one stage of lse_log2 (and of D)
  static constexpr int kDsBytes = kBlockN * kBlockM * 2;
  static constexpr int kSmemBytes = 2 * kKBytes + kStages * (2 * kQBytes + 2 * kStatBytes) + kDsBytes;
};

// The dS^T tile ([key][q row], 64 q rows = 128 bytes = 8 chunks a row) for swz.
struct Sm80DsTile {
  static constexpr int kRowBytes = 128;
};

}  // namespace fastattn::sm80
