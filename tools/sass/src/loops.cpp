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
  std::uint32_t last_exit = 0;
  bool has_exit = false;
  for (const auto& ins : code)
    if (ins.opcode() == "EXIT") {
      last_exit = ins.offset;
      has_exit = true;
    }
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
    l.out_of_line = has_exit && l.latch > last_exit;
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
      if (b.out_of_line) continue;
      if (holds(a, b) && b.kind == LoopKind::Regular) a.innermost = false;
      if (holds(a, b) && b.tensor_ops > 0) a.inner_tensor = true;
    }
  }
  return loops;
}

std::optional<Loop> hottest_loop(const std::vector<Instruction>& code) {
  const auto loops = find_loops(code);
  std::optional<Loop> best;
  auto better = [](const Loop& a, const Loop& b) {
    return a.tensor_ops > b.tensor_ops || (a.tensor_ops == b.tensor_ops && a.instructions > b.instructions);
  };
  for (const auto& l : loops)  // loops of tensor-core work: the innermost of them
    if (l.kind == LoopKind::Regular && !l.out_of_line && l.tensor_ops > 0 && !l.inner_tensor &&
        (!best || better(l, *best)))
      best = l;
  if (best) return best;
  for (const auto& l : loops)
    if (l.kind == LoopKind::Regular && !l.out_of_line && l.innermost && (!best || better(l, *best))) best = l;
  return best;
}

}  // namespace fastattn::sass
