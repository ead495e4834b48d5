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

void check_t_layout(int rows, int d) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " d " + std::to_string(d));
  std::vector<int> seen(rows * d, 0);
  for (int row = 0; row < rows; ++row)
    for (int col = 0; col < d; ++col) {
      const int at = dq_t_accum_index(row, col, rows);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, rows * d);
      ++seen[at];
    }
  for (int n : seen) ASSERT_EQ(n, 1) << "the forward map is not a permutation";
  for (int f = 0; f < rows * d / 4; ++f) {
    const DqPairs e = dq_t_accum_quad(f, rows);
    ASSERT_EQ(dq_t_accum_index(e.row, e.col, rows), 4 * f) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row + 1, e.col, rows), 4 * f + 1) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row, e.col + 8, rows), 4 * f + 2) << "float4 " << f;
    ASSERT_EQ(dq_t_accum_index(e.row + 1, e.col + 8, rows), 4 * f + 3) << "float4 " << f;
  }
  // The main kernel's adds: element i of thread t of the m64nN accumulator of head-dim slice w
  // (M row 16 (t / 32) + t % 32 / 4 + 8 (i / 2 % 2) = column lc of dQ, N column 8 (i / 4) + 2 (t % 4)
  // + i % 2 = the q row) goes to float 64 rows w + 4 (t + 128 (i / 4)) + i % 4.
  for (int w = 0; w < d / 64; ++w)
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < rows / 2; ++i) {
        const int lc = 16 * (t / 32) + (t % 32) / 4 + 8 * (i / 2 % 2), row = 8 * (i / 4) + 2 * (t % 4) + i % 2;
        ASSERT_EQ(dq_t_accum_index(row, 64 * w + lc, rows), 64 * rows * w + 4 * (t + 128 * (i / 4)) + i % 4)
            << "slice " << w << " thread " << t << " element " << i;
      }
}

// dQ^T runs: d 128 with 80-row q-blocks (BwdConfig<128, 80>, a warpgroup's 64 head-dim rows a
// slice) and the 80-key tile (BwdConfigKeys80: 64-row q-blocks; d 256 two slices per warpgroup, d 192
// one and two).
TEST(DqLayout, SwappedInverseMatchesForwardMap) {
  check_t_layout(80, 128);
  check_t_layout(64, 256);
  check_t_layout(64, 192);
}

// The d 192 postprocess (preprocess.cuh) names thread tid's float4 i (f = tid + 256 i, 256 threads: kBwdAuxThreads)
// by the thread's first float4 plus constants: row + 16 (i % 4), col + 64 (i / 4). Both forms agree for every f.
TEST(DqLayout, SwappedQuadByThreadSteps) {
  constexpr int kThreads = 256, kRows = 64, kPer = 16 * kRows / kThreads;
  for (int d : {192, 256})
    for (int tid = 0; tid < kThreads; ++tid) {
      const DqPairs e0 = dq_t_accum_quad(tid, kRows);
      for (int i = 0; i < kRows * d / 4 / kThreads; ++i) {
        const DqPairs e = dq_t_accum_quad(tid + kThreads * i, kRows);
        ASSERT_EQ(e.row, e0.row + 16 * (i % kPer)) << "d " << d << " thread " << tid << " load " << i;
        ASSERT_EQ(e.col, e0.col + 64 * (i / kPer)) << "d " << d << " thread " << tid << " load " << i;
      }
    }
}

}  // namespace
}  // namespace fastattn::sm90
