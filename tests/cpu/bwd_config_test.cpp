// The host rules that pick the Hopper backward's tile (src/cuda/sm90/bwd/config.h): which problems
// take the 80-row d 128 tile and the 80-key tile (d 256, d 192), and which keep the 64-row / 64-key kernels;
// and which d 64 / d 128 calls take the softcap kernel of its own.
#include <gtest/gtest.h>
#include <utility>

#include "cuda/sm90/bwd/config.h"

namespace fastattn::sm90 {
namespace {

TEST(BwdConfig, Keys80Rule) {
  // Full, causal (window_left -1, window_right 0) and right-only windows, default mode, no softcap: d 256
  // and d 192 (d_qk; d_v 128 too).
  for (int d : {192, 256}) {
    EXPECT_TRUE(bwd_keys80(d, false, -1, 0.f)) << "d " << d;
    // Deterministic mode, softcap and a left window edge keep the 64-key kernel.
    EXPECT_FALSE(bwd_keys80(d, true, -1, 0.f)) << "d " << d;
    EXPECT_FALSE(bwd_keys80(d, false, -1, 30.f)) << "d " << d;
    EXPECT_FALSE(bwd_keys80(d, false, 0, 0.f)) << "d " << d;
    EXPECT_FALSE(bwd_keys80(d, false, 64, 0.f)) << "d " << d;
  }
  for (int d : {64, 96, 128}) EXPECT_FALSE(bwd_keys80(d, false, -1, 0.f)) << "d " << d;
  // Its q-block is the 64-key kernel's, so the workspace (bwd_block_m) is the same either way.
  static_assert(BwdConfigKeys80<256>::kBlockM == BwdConfig<256>::kBlockM);
  static_assert(BwdConfigKeys80<192>::kBlockM == BwdConfig<192>::kBlockM);
  static_assert(BwdConfigKeys80<192, 128>::kBlockM == BwdConfig<192, 64, 128>::kBlockM);
  static_assert(BwdConfigKeys80<256>::kBlockN == 80 && BwdConfigKeys80<256>::kWgKeys * 2 == BwdConfigKeys80<256>::kBlockN);
}

// The warpgroups' 64-row halves cover each head dim once: dV^T d_v's atoms, dK^T / dQ^T d's, from atom 0
// up (warpgroup 0's first); d 256's shares are even (one code path), d 192's are not.
template <class Cfg>
void expect_halves_cover() {
  EXPECT_EQ(Cfg::dv_atom0(0), 0);
  EXPECT_EQ(Cfg::dv_atom0(1), Cfg::dv_halves(0));
  EXPECT_EQ(Cfg::dv_halves(0) + Cfg::dv_halves(1), Cfg::kHeadDimV / 64);
  EXPECT_EQ(Cfg::dk_atom0(0), 0);
  EXPECT_EQ(Cfg::dk_atom0(1), Cfg::dk_halves(0));
  EXPECT_EQ(Cfg::dk_halves(0) + Cfg::dk_halves(1), Cfg::kHeadDim / 64);
  EXPECT_GE(Cfg::dk_halves(0), 1);
  EXPECT_GE(Cfg::dk_halves(1), 1);
}
TEST(BwdConfig, Keys80Halves) {
  expect_halves_cover<BwdConfigKeys80<256>>();
  expect_halves_cover<BwdConfigKeys80<192>>();
  expect_halves_cover<BwdConfigKeys80<192, 128>>();
  static_assert(BwdConfigKeys80<256>::kEvenShares && !BwdConfigKeys80<192>::kEvenShares &&
                !BwdConfigKeys80<192, 128>::kEvenShares);
  // MMA work in halves (dV^T + dK^T + dQ^T) per warpgroup: 6 + 6, 4 + 5, 4 + 4.
  auto work = [](int dv, int dk) { return dv + 2 * dk; };
  EXPECT_EQ(work(BwdConfigKeys80<192>::kDvHalves0, BwdConfigKeys80<192>::kDkHalves0), 4);
  EXPECT_EQ(work(BwdConfigKeys80<192>::kDvHalves1, BwdConfigKeys80<192>::kDkHalves1), 5);
  EXPECT_EQ(work(BwdConfigKeys80<192, 128>::kDvHalves0, BwdConfigKeys80<192, 128>::kDkHalves0), 4);
  EXPECT_EQ(work(BwdConfigKeys80<192, 128>::kDvHalves1, BwdConfigKeys80<192, 128>::kDkHalves1), 4);
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
                !BwdConfig<256>::kSoftcapKernel && !BwdConfigKeys80<256>::kSoftcapKernel &&
                !BwdConfigKeys80<192>::kSoftcapKernel && !BwdConfigKeys80<192, 128>::kSoftcapKernel);
}

// d_qk 192 / d_v 128 (BwdConfig<192, 64, 128>): V / dO on two atoms, dV split on whole atoms so that each
// warpgroup's MMAs have 256 columns (dV + dK + dQ), the setmaxnreg split within the launch's 168
// registers a thread; the d_v = d_qk configs keep theirs. The host's q-block (workspace) is d 192's.
TEST(BwdConfig, Dv128) {
  using C = BwdConfig<192, 64, 128>;
  using D192 = BwdConfig<192>;
  static_assert(C::kHeadDim == 192 && C::kHeadDimV == 128 && C::kAtoms == 3 && C::kAtomsV == 2);
  static_assert(C::kVBytes == 2 * C::kKAtomBytes && C::kDoBytes == 2 * C::kQAtomBytes);
  static_assert(C::kDvCols0 % 64 == 0 && C::kDvCols1 % 64 == 0 && C::kDvCols0 + C::kDvCols1 == C::kHeadDimV);
  static_assert(C::kDvCols0 + C::kDkvCols0 + C::kDqCols0 == 256 && C::kDvCols1 + C::kDkvCols1 + C::kDqCols1 == 256);
  static_assert(C::kThreads == 384 && 128 * (168 - C::kProducerRegs) >= 256 * (C::kConsumerRegs - 168) &&
                C::kProducerRegs % 8 == 0 && C::kConsumerRegs % 8 == 0);
  static_assert(D192::kHeadDimV == 192 && D192::kDvCols0 == D192::kDkvCols0 && D192::kDvCols1 == D192::kDkvCols1 &&
                D192::kVBytes == D192::kKBytes && D192::kDoBytes == D192::kQBytes && D192::kProducerRegs == 24 &&
                D192::kConsumerRegs == 240);
  static_assert(C::kBlockM == D192::kBlockM && C::kBlockN == D192::kBlockN && C::kHasDetKernel && !C::kSoftcapKernel);
  EXPECT_EQ(bwd_block_m(192, bwd_rows80(192, false, -1, -1, 0.f)), C::kBlockM);
}

}  // namespace
}  // namespace fastattn::sm90
