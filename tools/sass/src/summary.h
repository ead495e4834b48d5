// Markdown instruction-mix summary of a build (docs/sass/summary.md).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kernel.h"

namespace fastattn::sass {

struct SummaryInput {
  std::string label;             // how the binary is named in the report, e.g. "libfastattn.so"
  std::vector<Kernel> kernels;
};

// Deterministic output (no dates, no absolute paths) so that a commit's diff shows only SASS
// changes.
void print_summary(std::ostream& os, const std::vector<SummaryInput>& inputs);

}  // namespace fastattn::sass
