// The split-D forward's host plan (cuda/sched/splitd_plan.h): its GQA packing at 64-row tiles, its
// unsplit tile count (the grid the split heuristic sees) and its split counts, for MLA decode
// (h_q 128 / h_kv 1, d_qk 576 / d_v 512) and prefill shapes. Host only, no device.
#include <gtest/gtest.h>

#include "cuda/sched/splitd_plan.h"
#include "cuda/splitd_rule.h"

namespace fastattn::cuda_backend {
namespace {

AttnParams shape(int batch, int hq, int hkv, int sq, int sk) {
  AttnParams a;
  a.batch = batch;
  a.heads_q = hq;
  a.heads_kv = hkv;
  a.q_per_kv = hq / hkv;
  a.seqlen_q = sq;
  a.seqlen_k = sk;
  return a;
}

TEST(SplitDPlan, MlaDecodePacksHeadsIntoTiles) {
  // s_q 1: R 1, 64 heads a tile, 2 tiles per KV head; s_q 4: R 4, 16 heads, 8 tiles.
  SplitDGrid g = splitd_grid(shape(1, 128, 1, 1, 4096), 512, false);
  EXPECT_EQ(g.pack.rows, 1);
  EXPECT_EQ(g.pack.heads, 64);
  EXPECT_EQ(g.pack.groups, 2);
  EXPECT_EQ(g.m_blocks, 1);
  EXPECT_EQ(g.pairs, 1);
  EXPECT_EQ(g.head_slots, 2);
  EXPECT_EQ(g.tiles, 2);
  g = splitd_grid(shape(8, 128, 1, 4, 4096), 512, false);
  EXPECT_EQ(g.pack.rows, 4);
  EXPECT_EQ(g.pack.heads, 16);
  EXPECT_EQ(g.head_slots, 8);
  EXPECT_EQ(g.tiles, 64);
  // GQA 16 / 1 at s_q 17: R 32, two heads a tile, 8 tiles; d_v 1024: two pairs.
  g = splitd_grid(shape(1, 16, 1, 17, 100), 1024, false);
  EXPECT_EQ(g.pack.rows, 32);
  EXPECT_EQ(g.pack.heads, 2);
  EXPECT_EQ(g.pairs, 2);
  EXPECT_EQ(g.tiles, 16);
}

TEST(SplitDPlan, NoPackingForVarlenMhaOrLongQueries) {
  SplitDGrid g = splitd_grid(shape(1, 128, 1, 1, 4096), 512, true);  // varlen
  EXPECT_EQ(g.pack.rows, 0);
  EXPECT_EQ(g.head_slots, 128);
  EXPECT_EQ(g.tiles, 128);
  g = splitd_grid(shape(2, 16, 16, 1, 4096), 512, false);  // no GQA
  EXPECT_EQ(g.pack.rows, 0);
  EXPECT_EQ(g.tiles, 32);
  g = splitd_grid(shape(1, 16, 1, 33, 4096), 320, false);  // s_q 33 > 32: a 64-row tile holds one head
  EXPECT_EQ(g.pack.rows, 0);
  EXPECT_EQ(g.m_blocks, 1);
  EXPECT_EQ(g.tiles, 16);
  g = splitd_grid(shape(1, 16, 16, 8192, 8192), 512, false);  // prefill
  EXPECT_EQ(g.tiles, 128 * 16);
}

TEST(SplitDPlan, SplitCounts) {
  const int sms = 132;
  // Requested counts as given, past the key blocks too.
  AttnParams a = shape(1, 128, 1, 1, 4096);
  EXPECT_EQ(splitd_splits(7, splitd_grid(a, 512, false), a, sms), 7);
  EXPECT_EQ(splitd_splits(300, splitd_grid(a, 512, false), a, sms), 300);
  // The heuristic fills the wave: b1 (2 tiles) s_k 4096 (32 blocks): one block a split, 64 CTAs.
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 32);
  // b1 s_k 16384 (128 blocks): 64 splits of 2 blocks, 128 CTAs.
  a = shape(1, 128, 1, 1, 16384);
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 64);
  // b8 (16 tiles) and b32 (64 tiles) at s_k 4096: 7 and 2 splits (112 and 128 CTAs).
  a = shape(8, 128, 1, 1, 4096);
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 7);
  a = shape(32, 128, 1, 1, 4096);
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 2);
  // A full machine (prefill) and one key block are not split.
  a = shape(1, 16, 16, 8192, 8192);
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 1);
  a = shape(1, 128, 1, 1, 100);
  EXPECT_EQ(splitd_splits(0, splitd_grid(a, 512, false), a, sms), 1);
}

}  // namespace
}  // namespace fastattn::cuda_backend

// The schedule rule: lockstep only for causal calls (window_right 0) at d_qk 320, where it measured faster.
TEST(SplitDPlan, ScheduleRule) {
  EXPECT_TRUE(fastattn::cuda_backend::splitd_lockstep_schedule(320, 0));
  EXPECT_FALSE(fastattn::cuda_backend::splitd_lockstep_schedule(320, -1));
  EXPECT_FALSE(fastattn::cuda_backend::splitd_lockstep_schedule(512, 0));
  EXPECT_FALSE(fastattn::cuda_backend::splitd_lockstep_schedule(1024, 0));
  EXPECT_FALSE(fastattn::cuda_backend::splitd_lockstep_schedule(576, -1));
}
