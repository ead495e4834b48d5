// The GPU tests' ScopedEnv (tests/gpu/scoped_env.h), checked here because it needs no GPU: after its
// scope a variable holds its earlier value again, or is absent again, whatever the scope did.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu/scoped_env.h"

namespace fastattn::gputest {
namespace {

constexpr const char* kName = "FASTATTN_SCOPED_ENV_TEST";

std::string value_or_absent() {
  const char* v = std::getenv(kName);
  return v ? std::string("=") + v : "absent";
}

TEST(ScopedEnv, SetsThenRemovesAnAbsentVariable) {
  unsetenv(kName);
  {
    ScopedEnv e(kName, "3");
    EXPECT_EQ(value_or_absent(), "=3");
  }
  EXPECT_EQ(value_or_absent(), "absent");
}

TEST(ScopedEnv, RestoresTheEarlierValue) {
  setenv(kName, "caller", 1);
  {
    ScopedEnv e(kName, "0");
    EXPECT_EQ(value_or_absent(), "=0");
    {
      ScopedEnv inner(kName, "7");  // nested scopes unwind in order
      EXPECT_EQ(value_or_absent(), "=7");
    }
    EXPECT_EQ(value_or_absent(), "=0");
  }
  EXPECT_EQ(value_or_absent(), "=caller");
  {
    ScopedEnv gone(kName, nullptr);  // removed for the scope only
    EXPECT_EQ(value_or_absent(), "absent");
  }
  EXPECT_EQ(value_or_absent(), "=caller");
  unsetenv(kName);
}

TEST(ScopedEnv, KeepExistingLeavesASetValue) {
  setenv(kName, "caller", 1);
  {
    ScopedEnv e(kName, "0", /*keep_existing=*/true);
    EXPECT_EQ(value_or_absent(), "=caller");
  }
  EXPECT_EQ(value_or_absent(), "=caller");
  unsetenv(kName);
  {
    ScopedEnv e(kName, "0", /*keep_existing=*/true);
    EXPECT_EQ(value_or_absent(), "=0");
  }
  EXPECT_EQ(value_or_absent(), "absent");
}

}  // namespace
}  // namespace fastattn::gputest
