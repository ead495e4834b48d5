// The CPU backend's tile classes and block key ranges against keep() on every element.
#include <gtest/gtest.h>

#include "cpu/tile_class.h"
#include "support/test_rng.h"

namespace fastattn::cpu {
namespace {

TEST(TileClass, MatchesOracleOnRandomMasksAndTiles) {
  const uint64_t seed = fastattn::testing::test_seed();
  fastattn::testing::Rng rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    const reference::MaskRule m{rng.uniform_int(0, 40), rng.uniform_int(0, 40), rng.uniform_int(-1, 12),
                                rng.uniform_int(-1, 12)};
    const int i0 = rng.uniform_int(0, 40), j0 = rng.uniform_int(0, 40);
    const int i1 = i0 + rng.uniform_int(1, 16), j1 = j0 + rng.uniform_int(1, 16);
    int kept = 0;
    for (int i = i0; i < i1; ++i) {
      for (int j = j0; j < j1; ++j) kept += reference::keep(m, i, j) ? 1 : 0;
    }
    const TileClass expect = kept == 0 ? TileClass::Empty
                             : kept == (i1 - i0) * (j1 - j0) ? TileClass::Full
                                                             : TileClass::Partial;
    ASSERT_EQ(int(classify_tile(m, i0, i1, j0, j1)), int(expect))
        << "rule (" << m.len_q << "," << m.len_k << "," << m.window_left << "," << m.window_right
        << ") tile [" << i0 << "," << i1 << ")x[" << j0 << "," << j1 << ") " << fastattn::testing::seed_note(seed);

    // Every kept key of the rows lies inside the block's key range.
    const reference::KeyRange hull = block_key_range(m, i0, i1);
    for (int i = i0; i < i1; ++i) {
      for (int j = 0; j < m.len_k; ++j) {
        if (reference::keep(m, i, j)) {
          ASSERT_TRUE(j >= hull.begin && j < hull.end);
        }
      }
    }
  }
}

}  // namespace
}  // namespace fastattn::cpu
