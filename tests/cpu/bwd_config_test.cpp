// The host rules that pick the Hopper backward's tile (src/cuda/sm90/bwd/config.h): which problems
// take the 80-row d 128 tile and the 80-key d 256 tile, and which keep the 64-row / 64-key kernels;
// and which d 64 / d 128 calls take the softcap kernel of its own.
#include <gtest/gtest.h>
#include <utility>

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
  // d 64 (128-row q-blocks) and d 128 (64-row), default mode on the accumulator path, with a softcap
  // (full, causal or windowed: the 80-row d 128 tile takes no softcap, so its full-mask softcap calls
  // come to the 64-row one).
  for (auto [d, bm] : {std::pair{64, 128}, std::pair{128, 64}}) {
    EXPECT_TRUE(bwd_softcap_kernel(d, bm, false, false, 30.f)) << "d " << d;
    EXPECT_TRUE(bwd_softcap_kernel(d, bm, false, false, 0.5f)) << "d " << d;
    // No softcap and the dQ ring keep their kernels; so does d 64's deterministic mode (d 128's has a
    // softcap twin of its own).
    EXPECT_FALSE(bwd_softcap_kernel(d, bm, false, false, 0.f)) << "d " << d;
    EXPECT_EQ(bwd_softcap_kernel(d, bm, true, false, 30.f), d == 128) << "d " << d;
    EXPECT_FALSE(bwd_softcap_kernel(d, bm, true, false, 0.f)) << "d " << d;
    EXPECT_FALSE(bwd_softcap_kernel(d, bm, false, true, 30.f)) << "d " << d;
  }
  static_assert(BwdConfig<128>::kDetSoftcapKernel && !BwdConfig<64>::kDetSoftcapKernel && !BwdConfig<128, 80>::kDetSoftcapKernel);
  // So do the other tiles and head dims.
  EXPECT_FALSE(bwd_softcap_kernel(128, 80, false, false, 30.f));
  for (int d : {96, 192, 256})
    EXPECT_FALSE(bwd_softcap_kernel(d, bwd_block_m(d, false), false, false, 30.f)) << "d " << d;
  // The rule sees the q-blocks the kernels are built for: a softcap call never takes the 80-row tile.
  EXPECT_EQ(bwd_block_m(64, false), 128);
  EXPECT_EQ(bwd_block_m(128, bwd_rows80(128, false, -1, -1, 30.f)), 64);
  // The rule and the configs that build the kernels agree.
  static_assert(BwdConfig<64>::kSoftcapKernel && BwdConfig<64>::kHasSoftcap && BwdConfig<64>::kPackAfterDs);
  static_assert(BwdConfig<128>::kSoftcapKernel && BwdConfig<128>::kHasSoftcap);
  static_assert(!BwdConfig<96>::kSoftcapKernel && !BwdConfig<128, 80>::kSoftcapKernel && !BwdConfig<192>::kSoftcapKernel &&
                !BwdConfig<256>::kSoftcapKernel && !BwdConfigKeys80::kSoftcapKernel);
}

}  // namespace
}  // namespace fastattn::sm90
