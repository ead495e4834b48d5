// The sm80 path's host rules (no device): FASTATTN_FORCE_ARCH's parsing (cuda/force_arch_rule.h; garbage
// is refused by name, not ignored) and the forced major's setter (cuda/device_info.h), and the refusals
// by name that check_forward asks on a major-8 device (cuda_backend::sm80_limits): block-sparse
// masks and element bitmasks, each naming the argument and "sm80".
#include <gtest/gtest.h>

#include <string>

#include "cuda/force_arch_rule.h"
#include "fastattn/fastattn.h"
#ifdef FASTATTN_WITH_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#include "gpu/scoped_env.h"
#endif

namespace fastattn::cuda_backend {
namespace {

// Host only (cuda/force_arch_rule.h): runs in CPU-only builds too.
TEST(Sm80Rules, ForceArchValues) {
  EXPECT_EQ(parse_forced_arch(nullptr), 0);
  EXPECT_EQ(parse_forced_arch(""), 0);
  EXPECT_EQ(parse_forced_arch("0"), 0);
  EXPECT_EQ(parse_forced_arch("80"), 8);
  EXPECT_EQ(parse_forced_arch("86"), 8);
  EXPECT_EQ(parse_forced_arch("89"), 8);
  EXPECT_EQ(parse_forced_arch("8"), 8);
  EXPECT_EQ(parse_forced_arch("90"), 9);
  EXPECT_EQ(parse_forced_arch("100"), 10);  // above the device's own: compute_major ignores it
  // Garbage names no arch: refused by name (compute_major), never silently the device's own kernels.
  for (const char* bad : {"abc", "sm80", "sm_80", "-80", "80a", " 80", "8.0", "75", "7", "00x", "99999999999"})
    EXPECT_EQ(parse_forced_arch(bad), kForcedArchInvalid) << bad;
  EXPECT_NE(std::string(forced_arch_values_text()).find("80"), std::string::npos);
}

#ifdef FASTATTN_WITH_CUDA
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
  a.num_splits = 0;  // chosen per problem
  EXPECT_TRUE(sm80_limits(a).ok());
  a.num_splits = 3;  // a hint on sm80 (split-KV there: forward_kvcache calls, session 43)
  EXPECT_TRUE(sm80_limits(a).ok());
  a.num_splits = 1;
  a.mask.kind = MaskKind::BlockSparse;
  Status st = sm80_limits(a);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_EQ(st.message.rfind("mask:", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
  a.mask.kind = MaskKind::DenseBitmask;
  st = sm80_limits(a);
  EXPECT_EQ(st.code, Code::NotSupported);
  EXPECT_EQ(st.message.rfind("mask: element bitmasks", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
}

// A FASTATTN_FORCE_ARCH that names no arch fails every CUDA call by name (compute_major).
TEST(Sm80Rules, ForcedGarbageIsRefused) {
  const int before = forced_arch_major();
  {
    gputest::ScopedEnv env("FASTATTN_FORCE_ARCH", "sm80");
    reread_forced_arch();
    EXPECT_EQ(forced_arch_major(), kForcedArchInvalid);
    int major = 0;
    const Status st = compute_major(&major);  // refused before the device is asked: no GPU needed
    EXPECT_EQ(st.code, Code::InvalidArgument);
    EXPECT_NE(st.message.find("FASTATTN_FORCE_ARCH: 'sm80' names no arch"), std::string::npos) << st.message;
  }
  reread_forced_arch();
  set_forced_arch_major(before);
}
#endif

}  // namespace
}  // namespace fastattn::cuda_backend
