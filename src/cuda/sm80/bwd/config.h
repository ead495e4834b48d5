// The Ampere backward's tile (FA2's shape for d <= 128: one CTA per 128 keys, 8 warps, q-blocks of
// 64 rows streamed through a 2-stage ring). Each warp owns 16 keys for S^T = K Q^T, dP^T = V dO^T,
// dV += P^T dO and dK += dS^T Q, so P^T and dS^T go from the accumulator registers straight into the
// A operand of the next mma (no smem round trip); only dS^T is stored to smem, for dQ = dS K, which
// the warps split 4 (q rows) x 2 (head-dim halves). Registers a thread: dK + dV D (64 at d 64, 128
// at d 128), S^T + dP^T 32 + 32, dQ's part D / 4 (after S^T and dP^T are dead).
// Smem: K and V of the key block once, Q / dO / lse / D of two q-blocks, dS^T of one:
//   d  64: 16 + 16 + 2 x (8 + 8 + 0.5) + 16 = 81 KB (an sm_86 / 89 SM's 99 KB holds one CTA)
//   d 128: 32 + 32 + 2 x (16 + 16 + 0.5) + 16 = 145 KB (A100 / H100 only: sm_86 / 89 refused by name)
//
// The warp split (session 40, FASTATTN_SM80_BWD_SPLIT, on unless built with -DFASTATTN_SM80_BWD_SPLIT=0):
// S^T and dP^T in 4 (keys, 32 each) x 2 (q rows, 32 each) warp tiles, P^T and dS^T through smem, then
// dV and dK in 4 (keys) x 2 (head-dim halves) tiles: each K / V / Q / dO fragment an ldmatrix brings
// feeds two m16 tiles instead of one (LDSM a step and warp 208 -> 152 at d 128, 108 -> 88 at d 64).
// It adds the P^T tile (16 KB): d 64 97 KB (sm_86 / 89's 99 KB still hold it), d 128 161 KB (A100: 163).
#pragma once

#ifndef FASTATTN_SM80_BWD_SPLIT
#define FASTATTN_SM80_BWD_SPLIT 1
#endif

namespace fastattn::sm80 {

constexpr bool kBwdWarpSplit = FASTATTN_SM80_BWD_SPLIT != 0;

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
  static constexpr bool kSplit = kBwdWarpSplit;
  // d 64 with the split: the warp's K and V A fragments stay in registers (the split's step uses 164 of
  // 255 registers there; 64 more save 16 of the 88 LDSM a step and warp).
  static constexpr bool kKvInRegs = kSplit && D == 64;
  // dQ in 2 (q rows) x 4 (d quarters) warp tiles (dq_add_2m) rather than 4 x 2 (dq_add): 8 LDSM fewer a
  // step at d 128 (152 -> 144), the same count at d 64 (where it lets K^T stay in registers). At d 128
  // the sm_80 SASS has no local memory either way; the sm_90 code that the driver JIT-compiles from the
  // compute_80 PTX (a forced run on an H100 / H200) spills 12 B with it (3 LDL a step), none with dq_add.
  static constexpr bool kDqRowPairs = kSplit;
  static constexpr int kPBytes = kSplit ? kDsBytes : 0;  // the P^T tile (same geometry as dS^T's)
  static constexpr int kSmemBytes = 2 * kKBytes + kStages * (2 * kQBytes + 2 * kStatBytes) + kDsBytes + kPBytes;
};

// The dS^T tile ([key][q row], 64 q rows = 128 bytes = 8 chunks a row) for swz.
struct Sm80DsTile {
  static constexpr int kRowBytes = 128;
};

}  // namespace fastattn::sm80
