// The sm80 path's host rules (no device): FASTATTN_FORCE_ARCH's parsing and the forced major's setter
// (cuda/device_info.h), and the refusals by name that check_forward asks on a major-8 device
// (cuda_backend::sm80_limits): split-KV and block-sparse masks, each naming the argument and "sm80".
#include <gtest/gtest.h>

#include <string>

#include "fastattn/fastattn.h"
#ifdef FASTATTN_WITH_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#endif

namespace fastattn::cuda_backend {
namespace {

#ifdef FASTATTN_WITH_CUDA
TEST(Sm80Rules, ForceArchValues) {
  EXPECT_EQ(parse_forced_arch(nullptr), 0);
  EXPECT_EQ(parse_forced_arch(""), 0);
  EXPECT_EQ(parse_forced_arch("abc"), 0);
  EXPECT_EQ(parse_forced_arch("-80"), 0);
  EXPECT_EQ(parse_forced_arch("80"), 8);
  EXPECT_EQ(parse_forced_arch("86"), 8);
  EXPECT_EQ(parse_forced_arch("8"), 8);
  EXPECT_EQ(parse_forced_arch("90"), 9);
}

TEST(Sm80Rules, ForcedMajorSetter) {
  const int before = forced_arch_major();
  set_forced_arch_major(8);
  EXPECT_EQ(forced_arch_major(), 8);
  set_forced_arch_major(-1);
  EXPECT_EQ(forced_arch_major(), 0);
  set_forced_arch_major(before);
}

TEST(Sm80Rules, RefusedByName) {
  AttnArgs a;
  a.num_splits = 1;
  EXPECT_TRUE(sm80_limits(a).ok());
  a.num_splits = 0;  // chosen per problem: no split on sm80
  EXPECT_TRUE(sm80_limits(a).ok());
  a.num_splits = 3;
  Status st = sm80_limits(a);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_NE(st.message.find("num_splits"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
  a.num_splits = 1;
  a.mask.kind = MaskKind::BlockSparse;
  st = sm80_limits(a);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_EQ(st.message.rfind("mask:", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
}
#endif

}  // namespace
}  // namespace fastattn::cuda_backend
