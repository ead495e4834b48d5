#include "loops.h"

#include "opcode_family.h"

namespace fastattn::sass {

namespace {

constexpr int kPollingMaxInstructions = 8;

bool polls(const Instruction& ins) {
  const auto op = ins.opcode();
  return op == "NANOSLEEP" || (op == "SYNCS" && ins.mnemonic.find("TRYWAIT") != std::string::npos);
}

}  // namespace

std::vector<Loop> find_loops(const std::vector<Instruction>& code) {
  std::vector<Loop> loops;
  for (const auto& br : code) {
    const auto target = br.branch_target();
    if (!target || *target >= br.offset) continue;
    Loop l{*target, br.offset};
    bool has_poll = false;
    for (const auto& ins : code) {
      if (ins.offset < l.head || ins.offset > l.latch) continue;
      ++l.instructions;
      l.stall_cycles += ins.control.stall;
      l.tensor_ops += opcode_family(ins.opcode()) == "tensor";
      has_poll = has_poll || polls(ins);
    }
    if (br.mnemonic.find(".ANY") != std::string::npos) l.kind = LoopKind::Convergence;
    else if (has_poll && l.instructions <= kPollingMaxInstructions) l.kind = LoopKind::Polling;
    loops.push_back(l);
  }
  // Two branches to the same head with the same latch are one loop seen twice: neither holds
  // the other.
  auto holds = [](const Loop& outer, const Loop& inner) {
    return outer.head <= inner.head && inner.latch <= outer.latch &&
           (outer.head != inner.head || outer.latch != inner.latch);
  };
  for (auto& a : loops) {
    for (const auto& b : loops) {
      if (holds(b, a)) ++a.depth;
      if (holds(a, b) && b.kind == LoopKind::Regular) a.innermost = false;
    }
  }
  return loops;
}

std::optional<Loop> hottest_loop(const std::vector<Instruction>& code) {
  std::optional<Loop> best;
  for (const auto& l : find_loops(code)) {
    if (!l.innermost || l.kind != LoopKind::Regular) continue;
    if (!best || l.tensor_ops > best->tensor_ops ||
        (l.tensor_ops == best->tensor_ops && l.instructions > best->instructions))
      best = l;
  }
  return best;
}

}  // namespace fastattn::sass
