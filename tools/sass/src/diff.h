// Two builds side by side: per kernel, Old / New / Delta tables (markdown, as in seed 000).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kernel.h"

namespace fastattn::sass {

struct DiffOptions {
  std::vector<std::string> pinned;   // opcodes always shown, in this order (e.g. R2P FSEL ISETP)
  bool all_opcodes = false;          // also show opcodes whose count did not change
  // (from, to) substring replacements applied to the OLD build's mangled names before matching,
  // so a renamed parameter type or namespace still pairs each kernel with its successor.
  std::vector<std::pair<std::string, std::string>> renames;
};

// "-32 (-1%)" style delta; the percentage only where `with_percent` and old is non-zero.
std::string format_delta(int old_value, int new_value, bool with_percent);

// Kernels are matched by arch and mangled name; one present in a single build is listed as
// added or removed. Returns the number of kernels whose SASS changed.
int print_diff(std::ostream& os, const std::vector<Kernel>& old_build,
               const std::vector<Kernel>& new_build, const DiffOptions& opt);

}  // namespace fastattn::sass
