// The backward's wave-tail split (src/cuda/sm90/bwd/wave_tail.h) on the host: the grid's items cover every
// (tile, q-block) exactly once, pieces as even as whole q-blocks allow and never empty; the rule splits only
// where a tail is left and the model says it pays, keeps the workspace cap, and picks the piece count whose
// modelled tail is the shortest; FASTATTN_BWD_TAIL forces or turns it off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/sm90/bwd/config.h"
#include "cuda/sm90/bwd/wave_tail.h"

namespace fastattn::sm90 {
namespace {

void check_cover(int tiles, int tail_from, int pieces, int blocks) {
  SCOPED_TRACE("tiles " + std::to_string(tiles) + " from " + std::to_string(tail_from) + " pieces " +
               std::to_string(pieces) + " blocks " + std::to_string(blocks));
  std::vector<int> seen(size_t(tiles) * blocks, 0);
  const int items = tail_from + (tiles - tail_from) * pieces;
  for (int item = 0; item < items; ++item) {
    int tile, slot, piece;
    bwd_tail_item(item, tail_from, pieces, tile, slot, piece);
    ASSERT_GE(tile, 0);
    ASSERT_LT(tile, tiles);
    ASSERT_EQ(slot >= 0, item >= tail_from) << "only the tail's items are pieces";
    if (slot >= 0) {
      ASSERT_EQ(tile, tail_from + slot);
      ASSERT_LT(piece, pieces);
    }
    int begin = 0, end = blocks;
    if (slot >= 0) bwd_tail_share(piece, pieces, begin, end);
    ASSERT_LT(begin, end) << "an empty piece";
    if (slot >= 0) {
      ASSERT_LE(end - begin, (blocks + pieces - 1) / pieces) << "uneven shares";
    }
    for (int m = begin; m < end; ++m) ++seen[size_t(tile) * blocks + m];
  }
  for (int n : seen) ASSERT_EQ(n, 1) << "a (tile, q-block) not worked on exactly once";
}

TEST(BwdWaveTail, ItemsCoverEveryBlockOnce) {
  for (int pieces : {2, 3, 5, 8})
    for (int blocks : {pieces, pieces + 1, 13, 103})
      for (auto [tiles, from] : {std::pair{7, 5}, std::pair{64, 60}, std::pair{2048, 1980}, std::pair{3, 0}})
        check_cover(tiles, from, pieces, blocks);
}

// The model's tail of `pieces` (1: whole tiles), as the rule counts it.
double modelled_tail(long long tiles, int sms, int blocks, int heads, int pieces) {
  const long long rem = tiles % sms;
  if (pieces == 1) return double(blocks) * heads;
  return double((rem * pieces + sms - 1) / sms) * (double((blocks + pieces - 1) / pieces) * heads + kBwdTailPieceSteps);
}

TEST(BwdWaveTail, RuleSplitsWhereTheModelPays) {
  constexpr long long kRun = 256ll * 128 * 4;  // d 128
  // b2 s8k h16 d128 full: 2048 tiles of 103 80-row q-blocks on 132 SMs, 68 tiles in the last wave. Five pieces
  // model shortest but need 44.6 MB of runs; three fit the 32 MiB cap.
  BwdTailPlan plan = bwd_tail_plan(2048, 132, 103, 1, kRun, kBwdTailMaxBytes);
  EXPECT_EQ(plan.pieces, 3);
  EXPECT_EQ(plan.tail_from, 2048 - 68);
  EXPECT_EQ(bwd_tail_plan(2048, 132, 103, 1, kRun, 1ll << 40).pieces, 5);
  // No tail left, fewer tiles than SMs, one q-block: never.
  EXPECT_EQ(bwd_tail_plan(132 * 8, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 0);
  EXPECT_EQ(bwd_tail_plan(100, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 0);
  EXPECT_EQ(bwd_tail_plan(2048, 132, 1, 1, kRun, kBwdTailMaxBytes).pieces, 0);
  // A last wave nearly full (131 of 132): two pieces would take two rounds of half a tile plus the start.
  EXPECT_EQ(bwd_tail_plan(132 * 5 + 131, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 0);
  // Over a sweep, a chosen count's modelled tail is the shortest of the counts within the cap, and beats the
  // whole tiles' by the minimum gain.
  for (long long tiles : {200ll, 1000ll, 1024ll, 2048ll, 4096ll, 5000ll})
    for (int blocks : {2, 7, 26, 52, 103, 205})
      for (int heads : {1, 4, 8}) {
        const int sms = 132;
        const BwdTailPlan p = bwd_tail_plan(tiles, sms, blocks, heads, kRun, kBwdTailMaxBytes);
        const double whole = modelled_tail(tiles, sms, blocks, heads, 1);
        const double launch = double(tiles / sms + 1) * blocks * heads;
        double best = whole;
        int best_k = 0;
        for (int k = 2; k <= kBwdTailMaxPieces && k <= blocks; ++k) {
          if ((tiles % sms) * k * kRun > kBwdTailMaxBytes) break;
          const double t = modelled_tail(tiles, sms, blocks, heads, k);
          if (t < best && whole - t >= kBwdTailMinGain * launch) {
            best = t;
            best_k = k;
          }
        }
        ASSERT_EQ(p.pieces, best_k) << tiles << " tiles, " << blocks << " blocks, " << heads << " heads";
        if (p.pieces > 0) {
          ASSERT_EQ(p.tail_from, tiles - tiles % sms);
          ASSERT_LE((tiles % sms) * p.pieces * kRun, kBwdTailMaxBytes);
          ASSERT_LE(p.pieces, blocks);
        }
      }
}

// The 80-key tile's cap (d 256: runs of 160 KB, 64-row q-blocks): b2 s4k h16 has 52 x 32 = 1664 tiles, 80 in the
// last wave; three pieces model a tail of 2 x (22 + 4) steps against 64 whole and need 39.3 MB of runs: split
// under the 80-key cap, not under d 128's. b4 s4k (3328 tiles, 28 in the last wave) keeps its four pieces.
TEST(BwdWaveTail, Keys80CapSplitsB2S4k) {
  constexpr long long kRun80 = 16ll * 256 * bwd_tail_run_chunks<BwdConfigKeys80<256, 256>>();
  static_assert(kRun80 == 160 * 1024, "d 256's runs: (dK^T + dV^T halves) x 10 float4 chunks a thread");
  EXPECT_EQ(bwd_tail_plan(1664, 132, 64, 1, kRun80, kBwdTailMaxBytes).pieces, 0);
  EXPECT_EQ(bwd_tail_plan(1664, 132, 64, 1, kRun80, kBwdTailMaxBytesKeys80).pieces, 3);
  EXPECT_EQ(bwd_tail_plan(3328, 132, 64, 1, kRun80, kBwdTailMaxBytesKeys80).pieces, 4);
  EXPECT_EQ(bwd_tail_plan(3328, 132, 64, 1, kRun80, kBwdTailMaxBytes).pieces, 4);
}

TEST(BwdWaveTail, EnvironmentForcesOrTurnsItOff) {
  constexpr long long kRun = 256ll * 128 * 4;
  setenv("FASTATTN_BWD_TAIL", "0", 1);
  EXPECT_EQ(bwd_tail_choice(2048, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 0);
  setenv("FASTATTN_BWD_TAIL", "7", 1);
  EXPECT_EQ(bwd_tail_choice(2048, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 7);
  EXPECT_EQ(bwd_tail_choice(2048, 132, 4, 1, kRun, kBwdTailMaxBytes).pieces, 4) << "capped to the q-blocks";
  EXPECT_EQ(bwd_tail_choice(132 * 3, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 0) << "no tail to split";
  EXPECT_EQ(bwd_tail_choice(64, 5, 13, 1, kRun, kBwdTailMaxBytes).tail_from, 60);
  unsetenv("FASTATTN_BWD_TAIL");
  EXPECT_EQ(bwd_tail_choice(2048, 132, 103, 1, kRun, kBwdTailMaxBytes).pieces, 3);
}

}  // namespace
}  // namespace fastattn::sm90
