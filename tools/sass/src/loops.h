// Loops found from backward branches, and the one most likely to be the kernel's hot loop.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

struct Loop {
  std::uint32_t head = 0;      // branch target: first instruction of the body
  std::uint32_t latch = 0;     // offset of the backward branch
  int instructions = 0;        // head..latch inclusive
  int stall_cycles = 0;        // sum of the body's stall counts: a static lower bound per trip
  int depth = 0;               // how many other loops enclose this one
  bool innermost = true;       // no other loop lies inside
  bool spin_wait = false;      // short mbarrier/sleep polling loop
};

// Every backward branch (target < own offset) defines a loop; a branch to itself (the trap
// ptxas puts after EXIT) does not.
std::vector<Loop> find_loops(const std::vector<Instruction>& code);

// The innermost non-polling loop nested deepest; among equals, the one with most instructions.
std::optional<Loop> hottest_loop(const std::vector<Instruction>& code);

}  // namespace fastattn::sass
