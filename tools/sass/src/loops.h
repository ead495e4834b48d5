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
  bool inner_tensor = false;   // some loop inside has tensor-core instructions
  bool out_of_line = false;    // its backward branch lies past the last EXIT: a retry block ptxas
                               // moved there, whose range is not a loop of the code it spans
};

// Every backward branch (target < own offset) defines a loop; a branch to itself (the trap
// ptxas puts after EXIT) does not.
std::vector<Loop> find_loops(const std::vector<Instruction>& code);

// The kernel's hot loop. Among Regular loops with tensor-core instructions, the innermost such:
// one with no tensor-core loop inside (an attention kernel's KV-block loop keeps its tile-walk
// and retry loops inside, so plain innermost would miss it), the most tensor instructions, then
// the most instructions. Without tensor-core loops: the innermost Regular loop with the most
// instructions. Out-of-line ranges are never chosen and never count as inner loops: ptxas moves
// retry blocks past the last EXIT, and their branches back make ranges that span most of the
// kernel (nesting depth is not used for the same reason).
std::optional<Loop> hottest_loop(const std::vector<Instruction>& code);

}  // namespace fastattn::sass
