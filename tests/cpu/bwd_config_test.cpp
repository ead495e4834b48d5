// The host rules that pick the Hopper backward's tile (src/cuda/sm90/bwd/config.h): which problems
// take the 80-row d 128 tile and the 80-key d 256 tile, and which keep the 64-row / 64-key kernels.
#include <gtest/gtest.h>

#include "cuda/sm90/bwd/config.h"

namespace fastattn::sm90 {
namespace {

TEST(BwdConfig, Keys80Rule) {
  // Full, causal (window_left -1, window_right 0) and right-only windows, default mode, no softcap.
  EXPECT_TRUE(bwd_keys80(256, false, -1, 0.f));
  // Deterministic mode, softcap and a left window edge keep the 64-key kernel; other head dims never take it.
  EXPECT_FALSE(bwd_keys80(256, true, -1, 0.f));
  EXPECT_FALSE(bwd_keys80(256, false, -1, 30.f));
  EXPECT_FALSE(bwd_keys80(256, false, 0, 0.f));
  EXPECT_FALSE(bwd_keys80(256, false, 64, 0.f));
  for (int d : {64, 96, 128, 192}) EXPECT_FALSE(bwd_keys80(d, false, -1, 0.f)) << "d " << d;
  // Its q-block is the 64-key kernel's, so the workspace (bwd_block_m) is the same either way.
  static_assert(BwdConfigKeys80::kBlockM == BwdConfig<256>::kBlockM);
  static_assert(BwdConfigKeys80::kBlockN == 80 && BwdConfigKeys80::kWgKeys * 2 == BwdConfigKeys80::kBlockN);
  static_assert(BwdConfigKeys80::kWgCols * 2 == BwdConfigKeys80::kHeadDim);
}

TEST(BwdConfig, Rows80Rule) {
  EXPECT_TRUE(bwd_rows80(128, false, -1, -1, 0.f));
  EXPECT_FALSE(bwd_rows80(128, false, -1, 0, 0.f));
  EXPECT_FALSE(bwd_rows80(128, true, -1, -1, 0.f));
  EXPECT_FALSE(bwd_rows80(256, false, -1, -1, 0.f));
  EXPECT_EQ(bwd_block_m(128, true), 80);
  EXPECT_EQ(bwd_block_m(256, false), 64);
  EXPECT_EQ(bwd_block_m(64, false), 128);
}

}  // namespace
}  // namespace fastattn::sm90
