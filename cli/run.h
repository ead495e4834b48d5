// `fastattn run` and `fastattn info`.
#pragma once

#include <string>
#include <vector>

namespace fastattn::cli {

// Exit status: 0 ok, 1 error over tolerance, 2 bad flags, 3 the library refused or failed.
int run_command(const std::vector<std::string>& args);
int info_command();

}  // namespace fastattn::cli
