// Loops found from backward branches, and the one most likely to be the kernel's hot loop.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

enum class LoopKind {
  Regular,
  Polling,      // short mbarrier try-wait / nanosleep retry loop
  Convergence,  // ptxas's "BRA.U.ANY" loop that serialises a uniform op (ELECT + TMA issue)
};

struct Loop {
  std::uint32_t head = 0;      // branch target: first instruction of the body
  std::uint32_t latch = 0;     // offset of the backward branch
  LoopKind kind = LoopKind::Regular;
  int instructions = 0;        // head..latch inclusive
  int stall_cycles = 0;        // sum of the body's stall counts: a static lower bound per trip
  int tensor_ops = 0;          // HMMA/HGMMA/... in the body
  int depth = 0;               // how many other loops' ranges enclose this one
  bool innermost = true;       // no Regular loop lies inside
};

// Every backward branch (target < own offset) defines a loop; a branch to itself (the trap
// ptxas puts after EXIT) does not.
std::vector<Loop> find_loops(const std::vector<Instruction>& code);

// The innermost Regular loop with the most tensor-core instructions, then the most
// instructions. Nesting depth is not used: ptxas moves retry blocks past EXIT and their branches
// back make ranges that enclose most of the kernel.
std::optional<Loop> hottest_loop(const std::vector<Instruction>& code);

}  // namespace fastattn::sass
