// The backward's causal CTA order (src/cuda/sm90/bwd/lpt_order.h) on the host: every (unit, key
// block) is worked on by exactly one CTA, inside each section key blocks go in rising order (the
// longest first under a causal mask) with every unit of the section in each round, and the
// list-scheduling model of the notes finds the tail that the order removes.
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

}  // namespace
}  // namespace fastattn::sm90
