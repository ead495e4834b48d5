// Which head dims the CUDA backend routes to the Hopper split-D forward (cuda/splitd_rule.h): host
// only, no device. d_qk and d_v multiples of 64 up to 1024, one of them above 256; every other
// (d, d_v) stays with the menu's kernels or is refused as before.
#include <gtest/gtest.h>

#include "cuda/splitd_rule.h"

namespace fastattn::cuda_backend {
namespace {

TEST(SplitDRule, TakesEveryMultipleOf64From320To1024) {
  for (int d = 320; d <= 1024; d += 64) {
    EXPECT_TRUE(splitd_dims(d, d)) << d;
  }
  EXPECT_TRUE(splitd_dims(576, 512));   // MLA's absorbed shape
  EXPECT_TRUE(splitd_dims(384, 128));   // a narrow V under a wide Q
  EXPECT_TRUE(splitd_dims(128, 1024));  // a wide V under a narrow Q
  EXPECT_TRUE(splitd_dims(256, 320));
}

TEST(SplitDRule, LeavesTheMenusDimsAndRefusesTheRest) {
  for (int d : {64, 96, 128, 192, 256}) EXPECT_FALSE(splitd_dims(d, d)) << d;
  EXPECT_FALSE(splitd_dims(192, 128));   // the menu's d_v < d row
  EXPECT_FALSE(splitd_dims(256, 256));
  EXPECT_FALSE(splitd_dims(1088, 1088));  // above 1024
  EXPECT_FALSE(splitd_dims(512, 1088));
  EXPECT_FALSE(splitd_dims(300, 300));    // not whole 64-column atoms
  EXPECT_FALSE(splitd_dims(512, 500));
  EXPECT_FALSE(splitd_dims(0, 512));
}

}  // namespace
}  // namespace fastattn::cuda_backend
