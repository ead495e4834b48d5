// The mask oracle against hand-written pictures of small masks (bottom-right alignment).
#include <gtest/gtest.h>

#include <string>

#include "reference/mask_oracle.h"

namespace fastattn::reference {
namespace {

// Rows of '1' (kept) and '.' (masked), one string per query row.
std::string picture(const MaskRule& m) {
  std::string s;
  for (int i = 0; i < m.len_q; ++i) {
    for (int j = 0; j < m.len_k; ++j) s += keep(m, i, j) ? '1' : '.';
    s += '\n';
  }
  return s;
}

TEST(MaskOracle, NoMaskKeepsEverythingInRange) {
  const MaskRule m{3, 4, -1, -1};
  EXPECT_EQ(picture(m), "1111\n1111\n1111\n");
  EXPECT_FALSE(keep(m, 3, 0));
  EXPECT_FALSE(keep(m, 0, 4));
  EXPECT_FALSE(keep(m, -1, 0));
}

TEST(MaskOracle, CausalSquare) {
  EXPECT_EQ(picture({3, 3, -1, 0}), "1..\n11.\n111\n");
}

TEST(MaskOracle, CausalMoreKeysThanQueriesIsBottomRightAligned) {
  // s_q = 2, s_k = 4: the last query sees every key.
  EXPECT_EQ(picture({2, 4, -1, 0}), "111.\n1111\n");
}

TEST(MaskOracle, CausalMoreQueriesThanKeysLeavesEmptyRows) {
  // s_q = 4, s_k = 2: rows 0 and 1 keep nothing (out = 0, lse = -inf).
  EXPECT_EQ(picture({4, 2, -1, 0}), "..\n..\n1.\n11\n");
  EXPECT_TRUE(key_range({4, 2, -1, 0}, 1).empty());
}

TEST(MaskOracle, LocalWindow) {
  EXPECT_EQ(picture({4, 4, 1, 1}), "11..\n111.\n.111\n..11\n");
  EXPECT_EQ(picture({3, 5, 0, 1}), "..11.\n...11\n....1\n");
}

TEST(MaskOracle, CausalPlusLocal) {
  // causal folds to window_right = 0
  EXPECT_EQ(picture({4, 4, 1, 0}), "1...\n11..\n.11.\n..11\n");
}

TEST(MaskOracle, ZeroLengths) {
  EXPECT_EQ(picture({0, 3, -1, -1}), "");
  EXPECT_EQ(picture({2, 0, -1, -1}), "\n\n");
}

TEST(MaskOracle, KeyRangeMatchesKeepEverywhere) {
  for (int lq = 0; lq < 7; ++lq) {
    for (int lk = 0; lk < 7; ++lk) {
      for (int wl = -1; wl < 4; ++wl) {
        for (int wr = -1; wr < 4; ++wr) {
          const MaskRule m{lq, lk, wl, wr};
          for (int i = -1; i <= lq; ++i) {
            const KeyRange r = key_range(m, i);
            for (int j = -2; j <= lk + 1; ++j) {
              const int64_t diag = i + lk - lq;
              const bool expect = i >= 0 && i < lq && j >= 0 && j < lk &&
                                  (wl < 0 || j >= diag - wl) && (wr < 0 || j <= diag + wr);
              ASSERT_EQ(keep(m, i, j), expect) << lq << ' ' << lk << ' ' << wl << ' ' << wr << ' ' << i << ' ' << j;
              ASSERT_EQ(j >= r.begin && j < r.end, expect);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fastattn::reference
