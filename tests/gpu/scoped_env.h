// An environment variable set (or removed) for one scope, then put back as it was: its earlier value,
// or its absence. The library reads its switches (FASTATTN_MAX_CTAS, FASTATTN_BWD_*) on every call,
// so a test that set one and then only unset it would wipe a value the caller of the suite chose,
// and one that returned early without unsetting would hand its setting to every later test.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace fastattn::gputest {

class ScopedEnv {
 public:
  // value nullptr: the variable is removed for the scope. keep_existing: a value already set wins
  // (setenv's overwrite = 0); it is still the one in force after the scope.
  ScopedEnv(const char* name, const char* value, bool keep_existing = false) : name_(name) {
    if (const char* old = std::getenv(name)) before_ = old;
    if (keep_existing && before_) return;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (before_)
      setenv(name_.c_str(), before_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;  // copied: getenv's pointer dies with the next setenv
};

}  // namespace fastattn::gputest
