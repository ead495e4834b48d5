// Evaluates gate rules on kernels; a failure names the kernel, the rule and the numbers.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kernel.h"
#include "rules.h"

namespace fastattn::sass {

struct GateResult {
  const Rule* rule = nullptr;
  const Kernel* kernel = nullptr;
  bool passed = false;
  std::string detail;   // "LDL=12 STL=12 spill stores=532 B spill loads=532 B (allowed: 0)"
};

std::vector<GateResult> evaluate_gates(const std::vector<Rule>& rules,
                                       const std::vector<Kernel>& kernels);

// Prints failures (and passes when verbose) plus a closing count; returns the failure count.
int print_gate_results(std::ostream& os, const std::vector<GateResult>& results,
                       std::size_t kernel_count, bool verbose);

}  // namespace fastattn::sass
