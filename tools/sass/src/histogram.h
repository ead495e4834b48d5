// Instruction counts of a kernel by opcode and by opcode family.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

struct Histogram {
  int total = 0;
  std::map<std::string, int> by_opcode;   // "LDG" -> 12
  std::map<std::string, int> by_family;   // "mem.global" -> 14

  int opcode(const std::string& op) const;
  int family(const std::string& f) const;
};

// NOPs that pad the end of a kernel's .text (after its last EXIT/BRA) are not code the kernel
// runs, so they are left out; a NOP between real instructions is counted.
Histogram count_instructions(const std::vector<Instruction>& code);

}  // namespace fastattn::sass
