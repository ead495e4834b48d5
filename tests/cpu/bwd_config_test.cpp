// The host rules that pick the Hopper backward's tile (src/cuda/sm90/bwd/config.h): which problems
// take the 80-row d 128 tile and the 80-key d 256 tile, and which keep the 64-row / 64-key kernels;
// and which d 64 calls take the softcap kernel of its own.
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

TEST(BwdConfig, SoftcapKernelRule) {
  // d 64 (128-row q-blocks), default mode, with a softcap: full, causal or windowed alike.
  EXPECT_TRUE(bwd_softcap_kernel(64, 128, false, false, 30.f));
  EXPECT_TRUE(bwd_softcap_kernel(64, 128, false, false, 0.5f));
  // No softcap and deterministic mode keep their kernels; so do the other head dims and tiles.
  EXPECT_FALSE(bwd_softcap_kernel(64, 128, false, false, 0.f));
  EXPECT_FALSE(bwd_softcap_kernel(64, 128, true, false, 30.f));
  EXPECT_FALSE(bwd_softcap_kernel(64, 128, false, true, 30.f));
  for (int d : {96, 128, 192, 256})
    EXPECT_FALSE(bwd_softcap_kernel(d, bwd_block_m(d, false), false, false, 30.f)) << "d " << d;
  EXPECT_FALSE(bwd_softcap_kernel(128, 80, false, false, 30.f));
  // The rule sees the q-block the d 64 kernel is built for, and the configs that build the kernel agree.
  EXPECT_EQ(bwd_block_m(64, false), 128);
  static_assert(BwdConfig<64>::kSoftcapKernel && BwdConfig<64>::kHasSoftcap && BwdConfig<64>::kPackAfterDs);
  static_assert(!BwdConfig<96>::kSoftcapKernel && !BwdConfig<128>::kSoftcapKernel && !BwdConfig<128, 80>::kSoftcapKernel &&
                !BwdConfig<192>::kSoftcapKernel && !BwdConfig<256>::kSoftcapKernel && !BwdConfigKeys80::kSoftcapKernel);
}

}  // namespace
}  // namespace fastattn::sm90
