// Independent check of decoded scoreboards against register dataflow: a variable-latency load
// that sets write scoreboard k must be waited on (wait mask bit k) by the time any later
// instruction touches its destination registers. A wrong bit layout breaks this at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

struct DataflowReport {
  int checked = 0;                      // producer -> first-use pairs examined
  std::vector<std::string> violations;  // "0x0050 LDG.E W2 -> 0x0090 FADD: no wait on SB2"
};

using Decoder = std::function<ControlCode(std::uint64_t)>;

// Straight-line only: a scan stops without verdict at a branch or a branch target.
DataflowReport check_load_waits(const std::vector<Instruction>& code, const Decoder& decode);

// Register numbers an operand list names: "R4" -> {4}, "[R2.64+0x10]" -> {2, 3}.
std::vector<int> registers_named(const std::string& operands);

}  // namespace fastattn::sass
