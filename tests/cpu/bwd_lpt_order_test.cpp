// The backward's causal CTA order (src/cuda/sm90/bwd/lpt_order.h) on the host: every (unit, key
// block) is worked on by exactly one CTA, inside each section key blocks go in rising order (the
// longest first under a causal mask) with every unit of the section in each round, the list-
// scheduling model of the notes finds the tail that the order removes, the sections are sized as
// measured, and each walk over a CTA's steps takes every (q head, q-block) once in its order.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
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
    if (first == prev_first) ASSERT_GE(block, prev_block) << "key blocks rise inside a section";
    prev_first = first;
    prev_block = block;
  }
  for (int n : seen) ASSERT_EQ(n, 1) << "not a permutation";
}

TEST(BwdLptOrder, PermutationLongestFirstPerSection) {
  for (int units : {1, 2, 3, 7, 8, 9, 32, 33, 64})
    for (int n_blocks : {1, 2, 5, 32, 64})
      for (int section : {1, 2, 4, 8, 16})
        if (section <= std::max(units, 1)) check_order(units, n_blocks, section);
}

// Greedy dispatch of CTAs in start order onto `sms` SMs (a CTA starts when an SM frees), each CTA
// taking its key block's causal step count plus a fixed cost: the finish time over the ideal.
double tail(int units, int n_blocks, int section, bool lpt, int sms = 132) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(0);
  double end = 0, total = 0;
  for (int item = 0; item < units * n_blocks; ++item) {
    const int at = lpt ? bwd_lpt_item(item, units, n_blocks, section) : item;
    const double work = 2.0 * (n_blocks - at % n_blocks) + 2;  // 64-row q-blocks, 128-key blocks
    const double t = free_at.top() + work;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
    total += work;
  }
  return end / (total / sms);
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
  EXPECT_EQ(bwd_lpt_section(2, 1, 1024, 128, kBwdLptL2Bytes), 2) << "at most the units there are";
  EXPECT_EQ(bwd_lpt_section(3, 1, 1, 64, kBwdLptL2Bytes), 2) << "a power of two";
  EXPECT_EQ(bwd_lpt_section(7, 64, 1 << 20, 256, kBwdLptL2Bytes), 1) << "at least one";
}

// Both walks take every (head, q-block) of the group x range exactly once in heads x blocks steps;
// upwards: heads outer, q-blocks rising; downwards: q-blocks falling from the last, heads inner.
TEST(BwdLptOrder, WalksVisitEveryStepOnce) {
  for (bool down : {false, true})
    for (int heads : {1, 3, 8})
      for (int begin : {0, 5})
        for (int count : {1, 2, 17}) {
          SCOPED_TRACE(std::string(down ? "down" : "up") + " heads " + std::to_string(heads) + " begin " +
                       std::to_string(begin) + " count " + std::to_string(count));
          const int h_first = 2 * heads, end = begin + count;
          std::vector<int> seen(size_t(heads) * count, 0);
          int h = -1, m = -1;
          bwd_walk_first(down, h_first, begin, end, h, m);
          for (int i = 0; i < heads * count; ++i) {
            ASSERT_GE(h, h_first);
            ASSERT_LT(h, h_first + heads);
            ASSERT_GE(m, begin);
            ASSERT_LT(m, end);
            ++seen[size_t(h - h_first) * count + (m - begin)];
            const int step_h = down ? h_first + i % heads : h_first + i / count;
            const int step_m = down ? end - 1 - i / heads : begin + i % count;
            ASSERT_EQ(h, step_h) << "step " << i;
            ASSERT_EQ(m, step_m) << "step " << i;
            bwd_walk_next(down, h_first, heads, begin, end, h, m);
          }
          for (int n : seen) ASSERT_EQ(n, 1);
        }
}

}  // namespace
}  // namespace fastattn::sm90
