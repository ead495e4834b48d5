// The backward's dQ accumulator layout (src/cuda/sm90/bwd/dq_layout.h) on the host: for every head
// dim's column split, the postprocess's float4 inverse names each element exactly once and agrees
// with the forward map the main kernel's adds follow.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/sm90/bwd/dq_layout.h"

namespace fastattn::sm90 {
namespace {

void check_layout(int d, int cols0) {
  SCOPED_TRACE("d " + std::to_string(d) + " cols0 " + std::to_string(cols0));
  std::vector<int> seen(64 * d, 0);
  for (int row = 0; row < 64; ++row)
    for (int col = 0; col < d; ++col) {
      const int at = dq_accum_index(row, col, cols0);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, 64 * d);
      ++seen[at];
    }
  for (int n : seen) ASSERT_EQ(n, 1) << "the forward map is not a permutation";
  for (int f = 0; f < 16 * d; ++f) {
    const DqPairs e = dq_accum_pairs(f, cols0);
    ASSERT_EQ(dq_accum_index(e.row, e.col, cols0), 4 * f) << "float4 " << f;
    ASSERT_EQ(dq_accum_index(e.row, e.col + 1, cols0), 4 * f + 1) << "float4 " << f;
    ASSERT_EQ(dq_accum_index(e.row + 8, e.col, cols0), 4 * f + 2) << "float4 " << f;
    ASSERT_EQ(dq_accum_index(e.row + 8, e.col + 1, cols0), 4 * f + 3) << "float4 " << f;
  }
}

// The splits BwdConfig uses (kDqCols0): d 64 with 128-row q-blocks all 64 columns per 64-row half
// (kDqRowSplit), d 96 64 + 32, d 128 64 + 64, d 192 64 + 128, d 256 128 + 128; and d 64's former
// 32 + 32 split.
TEST(DqLayout, InverseMatchesForwardMap) {
  check_layout(64, 64);
  check_layout(64, 32);
  check_layout(96, 64);
  check_layout(128, 64);
  check_layout(192, 64);
  check_layout(256, 128);
}

// d 128 with 80-row q-blocks (BwdConfig<128, 80>): dQ^T's run, each warpgroup's 64 head-dim rows.
TEST(DqLayout, SwappedInverseMatchesForwardMap) {
  constexpr int kRows = 80, kD = 128;
  std::vector<int> seen(kRows * kD, 0);
  for (int row = 0; row < kRows; ++row)
    for (int col = 0; col < kD; ++col) {
      const int at = dq_t_accum_index(row, col, kRows);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, kRows * kD);
      ++seen[at];
    }
  for (int n : seen) ASSERT_EQ(n, 1) << "the forward map is not a permutation";
  for (int f = 0; f < kRows * kD / 4; ++f) {
    const DqPairs e = dq_t_accum_quad(f, kRows);
    ASSERT_EQ(dq_t_accum_index(e.row, e.col, kRows), 4 * f) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row + 1, e.col, kRows), 4 * f + 1) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row, e.col + 8, kRows), 4 * f + 2) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row + 1, e.col + 8, kRows), 4 * f + 3) << "float4 " << f;
  }
}

}  // namespace
}  // namespace fastattn::sm90
