// The backward's causal CTA order (src/cuda/sm90/bwd/lpt_order.h) on the host: every (unit, key
// block) is worked on by exactly one CTA, inside each section key blocks go in rising order (the
// longest first under a causal mask) with every unit of the section in each round, the list-
// scheduling model of the notes finds the tail that the order removes, the sections are sized as
// measured, and each walk over a CTA's steps takes every (q head, q-block) once in its order.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/sm90/bwd/lpt_order.h"

namespace fastattn::sm90 {
namespace {

void check_order(int units, int n_blocks, int section) {
  SCOPED_TRACE("units " + std::to_string(units) + " n_blocks " + std::to_string(n_blocks) + " section " +
               std::to_string(section));
  std::vector<int> seen(size_t(units) * n_blocks, 0);
  int prev_block = 0, prev_first = 0;
  for (int item = 0; item < units * n_blocks; ++item) {
    const int at = bwd_lpt_item(item, units, n_blocks, section);
    ASSERT_GE(at, 0);
    ASSERT_LT(at, units * n_blocks);
    ++seen[size_t(at)];
    const int unit = at / n_blocks, block = at % n_blocks;
    const int first = unit / section * section;
    ASSERT_GE(first, prev_first) << "sections run one after another";
    if (first == prev_first) {
      ASSERT_GE(block, prev_block) << "key blocks rise inside a section";
    }
    prev_first = first;
    prev_block = block;
  }
  for (int n : seen) ASSERT_EQ(n, 1) << "not a permutation";
}

TEST(BwdLptOrder, PermutationLongestFirstPerSection) {
  for (int units : {1, 2, 3, 7, 8, 9, 32, 33, 64})
    for (int n_blocks : {1, 2, 5, 13, 32, 52, 64})  // 13, 52: 80-key blocks of s 1k, 4k
      for (int section : {1, 2, 4, 8, 16})
        if (section <= std::max(units, 1)) check_order(units, n_blocks, section);
}

// Greedy dispatch of CTAs in start order onto `sms` SMs (a CTA starts when an SM frees), CTA i taking
// works[i] steps: the finish time over the ideal (total work / sms).
double finish_over_ideal(const std::vector<double>& works, int sms = 132) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(0);
  double end = 0, total = 0;
  for (double work : works) {
    const double t = free_at.top() + work;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
    total += work;
  }
  return end / (total / sms);
}

// One CTA per key block, each taking its causal step count (64-row q-blocks, 128-key blocks, times
// the group's q heads) plus a fixed cost, in block order or longest first.
double tail(int units, int n_blocks, int section, bool lpt, int heads = 1) {
  std::vector<double> works;
  for (int item = 0; item < units * n_blocks; ++item) {
    const int at = lpt ? bwd_lpt_item(item, units, n_blocks, section) : item;
    works.push_back(2.0 * heads * (n_blocks - at % n_blocks) + 2);
  }
  return finish_over_ideal(works);
}

TEST(BwdLptOrder, ModelRemovesTheCausalTail) {
  // d128 s8k b2 h16 (32 units x 64 key blocks; 4 units of Q, dO, dQ fit 40 MB) and s4k b4 h16.
  EXPECT_GT(tail(32, 64, 1, false), 1.04);
  EXPECT_LT(tail(32, 64, 4, true), 1.01);
  EXPECT_GT(tail(64, 32, 1, false), 1.04);
  EXPECT_LT(tail(64, 32, 8, true), 1.01);
}

// Sections of whole units whose Q, dO and fp32 dQ (8 d bytes per row and q head) fit 40 MB: the
// dense d 128 shapes of the notes get 4 (s 8k) and 8 (s 4k); the GQA shape (8 q heads per unit,
// 32 MiB) one unit, i.e. block order (wider sections were measured slower there: L2).
TEST(BwdLptOrder, SectionsOfUnitsThatFitL2) {
  EXPECT_EQ(bwd_lpt_section(2 * 16, 1, 8192, 128, kBwdLptL2Bytes), 4);
  EXPECT_EQ(bwd_lpt_section(4 * 16, 1, 4096, 128, kBwdLptL2Bytes), 8);
  EXPECT_EQ(bwd_lpt_section(4 * 8, 8, 4096, 128, kBwdLptL2Bytes), 1);
  // The 80-key d 256 tile's causal shapes: s4k b4 h8 (8 MiB a unit; FA3's section there is 4 too)
  // and s1k b16 h8.
  EXPECT_EQ(bwd_lpt_section(4 * 8, 1, 4096, 256, kBwdLptL2Bytes), 4);
  EXPECT_EQ(bwd_lpt_section(16 * 8, 1, 1024, 256, kBwdLptL2Bytes), 16);
  EXPECT_EQ(bwd_lpt_section(2, 1, 1024, 128, kBwdLptL2Bytes), 2) << "at most the units there are";
  EXPECT_EQ(bwd_lpt_section(3, 1, 1, 64, kBwdLptL2Bytes), 2) << "a power of two";
  EXPECT_EQ(bwd_lpt_section(7, 64, 1 << 20, 256, kBwdLptL2Bytes), 1) << "at least one";
}

// Which calls take the longest-first order where the config builds it: every d 128 call; d 64 from
// 16 key blocks of 128 (s_k 2048) on.
TEST(BwdLptOrder, LongestFirstRule) {
  for (int n : {1, 8, 15, 16, 64}) EXPECT_TRUE(bwd_longest_first(128, n)) << n;
  for (int n : {1, 8, 15}) EXPECT_FALSE(bwd_longest_first(64, n)) << n;
  for (int n : {16, 32, 64}) EXPECT_TRUE(bwd_longest_first(64, n)) << n;
  EXPECT_TRUE(bwd_longest_first(256, 8)) << "the 80-key d 256 tile keeps its order at s 1k";
}

// Every walk takes every (head, q-block) of the group x range exactly once in heads x blocks steps;
// upwards: heads outer, q-blocks rising; downwards: q-blocks falling from the last, heads inner;
// upwards with the heads inner: q-blocks rising from the first.
TEST(BwdLptOrder, WalksVisitEveryStepOnce) {
  for (int walk : {kBwdWalkUp, kBwdWalkDown, kBwdWalkUpInner})
    for (int heads : {1, 3, 8})
      for (int begin : {0, 5})
        for (int count : {1, 2, 17}) {
          SCOPED_TRACE("walk " + std::to_string(walk) + " heads " + std::to_string(heads) + " begin " +
                       std::to_string(begin) + " count " + std::to_string(count));
          const int h_first = 2 * heads, end = begin + count;
          std::vector<int> seen(size_t(heads) * count, 0);
          int h = -1, m = -1;
          bwd_walk_first(walk, h_first, begin, end, h, m);
          for (int i = 0; i < heads * count; ++i) {
            ASSERT_GE(h, h_first);
            ASSERT_LT(h, h_first + heads);
            ASSERT_GE(m, begin);
            ASSERT_LT(m, end);
            ++seen[size_t(h - h_first) * count + (m - begin)];
            const int step_h = walk == kBwdWalkUp ? h_first + i / count : h_first + i % heads;
            const int step_m = walk == kBwdWalkUp     ? begin + i % count
                               : walk == kBwdWalkDown ? end - 1 - i / heads
                                                      : begin + i / heads;
            ASSERT_EQ(h, step_h) << "step " << i;
            ASSERT_EQ(m, step_m) << "step " << i;
            bwd_walk_next(walk, h_first, heads, begin, end, h, m);
          }
          for (int n : seen) ASSERT_EQ(n, 1);
        }
}

// Pairs: over the pairs j < ceil(N / 2) of a sequence's N key blocks every block comes once (the
// middle one of odd N alone); j past the pairs has none (a sequence shorter than the longest).
TEST(BwdLptOrder, PairsCoverEveryKeyBlockOnce) {
  for (int n : {0, 1, 2, 3, 17, 32, 33, 65}) {
    SCOPED_TRACE("key blocks " + std::to_string(n));
    std::vector<int> seen(size_t(n), 0);
    for (int j = 0; j < (n + 1) / 2 + 3; ++j) {
      int first = -1, second = -1;
      const int tiles = bwd_pair_blocks(j, n, first, second);
      ASSERT_EQ(tiles, j < n / 2 ? 2 : (2 * j + 1 == n ? 1 : 0)) << "pair " << j;
      if (tiles >= 1) ++seen[size_t(first)];
      if (tiles == 2) {
        ASSERT_LT(first, second);
        ++seen[size_t(second)];
      }
    }
    for (int c : seen) ASSERT_EQ(c, 1);
  }
}

// Paired CTAs for units of key blocks under a causal mask, each tile with the fixed cost of the
// model above; all in the block order of the pairs.
double pair_tail(int units, int n_blocks, int heads) {
  std::vector<double> works;
  for (int item = 0; item < units * ((n_blocks + 1) / 2); ++item) {
    int first, second;
    const int tiles = bwd_pair_blocks(item % ((n_blocks + 1) / 2), n_blocks, first, second);
    double work = 2.0 * heads * (n_blocks - first) + 2;
    if (tiles == 2) work += 2.0 * heads * (n_blocks - second) + 2;
    works.push_back(work);
  }
  return finish_over_ideal(works);
}

// Equal CTAs: every pair of N key blocks under a causal mask sees 2 N + 2 q-blocks of 64 rows (the
// middle block of odd N: N + 1); the GQA s4k shape's tail (block order 1.14 x) falls to ~1.03 x
// (3.88 waves of equal CTAs); and the host pairs exactly there (sections of 1, pairs >= SMs), not
// at the dense shapes that longest first already serves, nor where the pairs leave SMs idle.
TEST(BwdLptOrder, PairsEvenTheCausalTail) {
  for (int n : {31, 32, 64}) {
    for (int j = 0; j < (n + 1) / 2; ++j) {
      int first, second;
      const int tiles = bwd_pair_blocks(j, n, first, second);
      const int q_blocks = 2 * (n - first) + (tiles == 2 ? 2 * (n - second) : 0);
      EXPECT_EQ(q_blocks, tiles == 2 ? 2 * n + 2 : n + 1) << n << " " << j;
    }
  }
  EXPECT_GT(tail(32, 32, 1, false, 8), 1.12);
  EXPECT_LT(pair_tail(32, 32, 8), 1.04);
  EXPECT_TRUE(bwd_pair_key_blocks(bwd_lpt_section(4 * 8, 8, 4096, 128, kBwdLptL2Bytes), 32, 32, 132)) << "GQA s4k";
  EXPECT_FALSE(bwd_pair_key_blocks(bwd_lpt_section(2 * 16, 1, 8192, 128, kBwdLptL2Bytes), 32, 64, 132)) << "s8k";
  EXPECT_FALSE(bwd_pair_key_blocks(bwd_lpt_section(4 * 16, 1, 4096, 128, kBwdLptL2Bytes), 64, 32, 132)) << "s4k";
  EXPECT_FALSE(bwd_pair_key_blocks(1, 1, 33, 132)) << "17 pairs on 132 SMs: all at once either way";
  EXPECT_TRUE(bwd_pair_key_blocks(1, 1, 33, 3)) << "the tests' 3 CTAs";
}

// The pair's walks keep a unit's CTAs on one q-block: started together, block j walks down from the
// last q-block and block N - 1 - j then walks up from where its range starts, so at each step every
// CTA of the unit is on q-block 2N - 1 - T (first tiles) or T - 2 (second tiles), T = step / heads.
TEST(BwdLptOrder, PairWalksMeetOnOneQBlock) {
  const int n = 32, heads = 8, m_blocks = 2 * n;
  std::vector<std::vector<std::pair<int, int>>> walks;  // per CTA: (head, q-block) per step
  for (int j = 0; j < n / 2; ++j) {
    int first, second;
    ASSERT_EQ(bwd_pair_blocks(j, n, first, second), 2);
    std::vector<std::pair<int, int>> w;
    for (int tile = 0; tile < 2; ++tile) {
      const int walk = tile ? kBwdWalkUpInner : kBwdWalkDown, begin = 2 * (tile ? second : first);
      int h, m;
      bwd_walk_first(walk, 0, begin, m_blocks, h, m);
      for (int i = 0; i < heads * (m_blocks - begin); ++i, bwd_walk_next(walk, 0, heads, begin, m_blocks, h, m))
        w.emplace_back(h, m);
    }
    ASSERT_EQ(int(w.size()), heads * (2 * n + 2));
    walks.push_back(w);
  }
  for (int step = 0; step < heads * (2 * n + 2); ++step) {
    std::vector<std::pair<int, int>> at;
    for (const auto& w : walks) at.push_back(w[size_t(step)]);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    ASSERT_LE(at.size(), 2u) << "step " << step;
  }
}

// A batch-shared bias under the sections (bwd_lpt_batch_inner_item): random batch / KV heads / key blocks /
// section widths, batch 1 among them. Every (unit, key block) once; each position keeps bwd_lpt_item's key
// block (its work: the rounds balance as before); batch 1 is the identity; where the width is a multiple of
// the batch, each run of `batch` positions of a round is one (KV head, key block) over every batch entry.
TEST(BwdLptOrder, BatchInnerSectionsPermuteAndKeepWork) {
  std::mt19937 rng(40);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int batch = trial % 5 == 0 ? 1 : pick(1, 6), heads_kv = pick(1, 9), n_blocks = pick(1, 70);
    const int units = batch * heads_kv;
    int section = 1 << pick(0, 5);
    while (section > units) section /= 2;
    SCOPED_TRACE("batch " + std::to_string(batch) + " heads_kv " + std::to_string(heads_kv) + " n_blocks " +
                 std::to_string(n_blocks) + " section " + std::to_string(section));
    std::vector<int> seen(size_t(units) * n_blocks, 0);
    std::vector<int> at(size_t(units) * n_blocks);
    for (int x = 0; x < units * n_blocks; ++x) {
      const int lpt = bwd_lpt_item(x, units, n_blocks, section);
      const int got = bwd_lpt_batch_inner_item(lpt, n_blocks, batch, heads_kv);
      ASSERT_GE(got, 0);
      ASSERT_LT(got, units * n_blocks);
      ++seen[size_t(got)];
      at[size_t(x)] = got;
      ASSERT_EQ(got % n_blocks, lpt % n_blocks) << "position " << x << " changed its key block";
      if (batch == 1) {
        ASSERT_EQ(got, lpt);
      }
    }
    for (int n : seen) ASSERT_EQ(n, 1) << "not a permutation";
    if (batch == 1 || section % batch != 0) continue;
    for (int x = 0; x < units * n_blocks; x += batch) {  // rounds of full sections hold whole runs
      const int unit0 = at[size_t(x)] / n_blocks, kv_head = unit0 % heads_kv, block = at[size_t(x)] % n_blocks;
      std::vector<int> entries(size_t(batch), 0);
      for (int i = 0; i < batch; ++i) {
        const int unit = at[size_t(x + i)] / n_blocks;
        ASSERT_EQ(unit % heads_kv, kv_head) << "position " << x + i;
        ASSERT_EQ(at[size_t(x + i)] % n_blocks, block) << "position " << x + i;
        ++entries[size_t(unit / heads_kv)];
      }
      for (int n : entries) ASSERT_EQ(n, 1) << "the run at " << x << " misses a batch entry";
    }
  }
}

}  // namespace
}  // namespace fastattn::sm90
