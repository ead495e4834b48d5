// Human-readable views of kernels: resource/instruction-mix report and annotated listing.
#pragma once

#include <ostream>
#include <vector>

#include "kernel.h"

namespace fastattn::sass {

struct ReportOptions {
  bool annotate = false;      // print every instruction with its decoded control code
  bool all_opcodes = false;   // full opcode table instead of the 12 most frequent
};

void print_report(std::ostream& os, const Kernel& k, const ReportOptions& opt);

// "/*0050*/ [B------:R-:W2:-:S01] ---- LDG.E R0, desc[UR4][R2.64] ;" with '>' marking the
// hot loop's body.
void print_annotated(std::ostream& os, const Kernel& k);

}  // namespace fastattn::sass
