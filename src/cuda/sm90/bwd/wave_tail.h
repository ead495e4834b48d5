// The default mode's wave tail without a mask, host and device (the CPU tests check it). Every key tile
// of a full mask is the same length and a CTA holds an SM, so the grid runs in waves of `sms` tiles;
// the last wave's `rem = tiles % sms` tiles run while the other SMs idle (b2 s8k h16 d128: 2048 tiles on
// 132 SMs, 15.52 waves of work in 16). The pieces: the last `rem` tiles are cut into `pieces` shares of
// their q-blocks each, grid items tail_from + slot x pieces + piece; a piece writes its dK / dV partial
// (fp32) to its run of the workspace, and the tile's last piece to finish adds the runs in piece order
// and stores (epilogue.cuh, bwd_tail_gather): deterministic, whatever order the pieces end in.
#pragma once

#include <cstdlib>

#include "cuda/common/host_device.h"

namespace fastattn::sm90 {

// A grid item's tile (the block-index item) and its piece; slot -1: a whole tile (item unchanged).
FASTATTN_HD void bwd_tail_item(int item, int tail_from, int pieces, int& tile_item, int& slot, int& piece) {
  tile_item = item;
  slot = -1;
  piece = 0;
  if (pieces > 1 && item >= tail_from) {
    const int rel = item - tail_from;
    slot = rel / pieces;
    piece = rel - slot * pieces;
    tile_item = tail_from + slot;
  }
}

// The split tiles, each with a count and `pieces` runs: the grid's tiles (key blocks x KV heads x batch) from
// tail_from on. Params: BwdParams (host and device read it alike).
template <class Params>
FASTATTN_HD int bwd_tail_slots(const Params& p) {
  return p.n_blocks * p.attn.heads_kv * p.attn.batch - p.tail_from;
}

// Piece `piece` of `pieces`: q-blocks [begin, end) of the tile's [begin, end), shares as even as whole
// q-blocks allow (the host keeps pieces <= the blocks, so none is empty).
FASTATTN_HD void bwd_tail_share(int piece, int pieces, int& begin, int& end) {
  const int count = end - begin, lo = begin + count * piece / pieces, hi = begin + count * (piece + 1) / pieces;
  begin = lo;
  end = hi;
}

// A piece's cost beyond its steps, in steps: its start (K / V and the first Q in flight, registers
// claimed: ~3 us of a 1.3 us step at d 128, session 32's stamps) and its partial's write plus the last
// piece's reads of the others' runs (L2, ~1-4 us).
inline constexpr int kBwdTailPieceSteps = 4;
// A split must win at least this share of the whole launch's time (the model is coarse).
inline constexpr double kBwdTailMinGain = 0.004;
inline constexpr int kBwdTailMaxPieces = 8;
// The runs' workspace at most (the partials pass through L2 beside the last wave's Q / dO). The 80-key tile's
// (d 256, runs of 160 KB): 48 MiB, so that b2 s4k h16 (80 tiles in the last wave) splits in three (39.3 MB);
// at d 128 44.6 MB of runs measured no slower than 25 MB (session 48).
inline constexpr long long kBwdTailMaxBytes = 32ll << 20;
inline constexpr long long kBwdTailMaxBytesKeys80 = 48ll << 20;

// The float4 chunks a consumer thread holds in a piece's run: kernel.cuh's dK and dV over the head dim
// (bwd_tail_gather), the 80-key tile's dK^T / dV^T halves of 40 floats (bwd_tail_gather_keys80). A run is 256
// consumer threads' chunks: 16 x 256 x chunks bytes.
template <class Cfg>
constexpr int bwd_tail_run_chunks() {
  if constexpr (Cfg::kKeys80)
    return (Cfg::dk_halves(0) + Cfg::dv_halves(0)) * 10;
  else
    return Cfg::kHeadDim / 4;
}

struct BwdTailPlan {
  int tail_from = 0;  // the first split tile's item
  int pieces = 0;     // 0: no split
};

// The host's rule for `tiles` tiles of `blocks` q-blocks (times `heads` q heads: the steps) each on
// `sms` SMs (one CTA an SM), a piece's run taking `run_bytes` of the workspace, at most `max_bytes` in
// all: the piece count (at most the q-blocks) whose tail, ceil(rem x pieces / sms) rounds of
// ceil(blocks / pieces) x heads + kBwdTailPieceSteps steps, is shortest, where it beats the whole tiles'
// tail (one round of blocks x heads) by kBwdTailMinGain of the launch.
inline BwdTailPlan bwd_tail_plan(long long tiles, int sms, int blocks, int heads, long long run_bytes,
                                 long long max_bytes) {
  BwdTailPlan plan;
  if (sms <= 1 || tiles <= sms || blocks < 2 || heads < 1) return plan;
  const long long rem = tiles % sms;
  if (rem == 0) return plan;
  const double whole = double(blocks) * heads, launch = double(tiles / sms + 1) * whole;
  double best = whole;
  for (int k = 2; k <= kBwdTailMaxPieces && k <= blocks; ++k) {
    if (rem * k * run_bytes > max_bytes) break;
    const long long rounds = (rem * k + sms - 1) / sms;
    const double tail = double(rounds) * (double((blocks + k - 1) / k) * heads + kBwdTailPieceSteps);
    if (tail < best && whole - tail >= kBwdTailMinGain * launch) {
      best = tail;
      plan.pieces = k;
    }
  }
  if (plan.pieces > 0) plan.tail_from = int(tiles - rem);
  return plan;
}

// The launch's plan: bwd_tail_plan (runs of at most max_bytes), or as FASTATTN_BWD_TAIL says: 0 (or not a number) no split, so that
// one library serves both sides of an A/B; n >= 2 n pieces (at most the q-blocks) wherever a tail is left,
// so that the tests cut small problems (with FASTATTN_MAX_CTAS for few SMs).
inline BwdTailPlan bwd_tail_choice(long long tiles, int sms, int blocks, int heads, long long run_bytes,
                                   long long max_bytes) {
  if (const char* env = std::getenv("FASTATTN_BWD_TAIL")) {
    BwdTailPlan plan;
    const int asked = std::atoi(env), n = asked < blocks ? asked : blocks;
    if (n >= 2 && sms >= 1 && tiles > sms && tiles % sms != 0) {
      plan.pieces = n;
      plan.tail_from = int(tiles - tiles % sms);
    }
    return plan;
  }
  return bwd_tail_plan(tiles, sms, blocks, heads, run_bytes, max_bytes);
}

}  // namespace fastattn::sm90
