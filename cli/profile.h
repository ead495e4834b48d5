// `fastattn profile`: the probed Hopper forward on one problem (issue #6, docs/profiling.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cuda/prof/profile_api.h"
#include "options.h"

namespace fastattn::cli {

// Flags of `profile` on top of the problem flags it shares with `run`.
struct ProfileOptions {
  std::string out_dir = "profile-out";  // profile.json, profile.md, timeline.png
  prof::ProfileRequest request;
  bool plot = true;
};

// Takes the profile-only flags out of `args` (the rest are run's problem flags). Returns an error
// message naming the flag, or nothing.
std::optional<std::string> take_profile_flags(std::vector<std::string>& args, ProfileOptions& p);

// Exit status: 0 ok, 1 a probed kernel's output differs from the default kernel's, 2 bad flags,
// 3 cannot profile here (no CUDA build, no probed kernels, no GPU) or the run failed.
int profile_command(const std::vector<std::string>& args);
const char* profile_help();

}  // namespace fastattn::cli
