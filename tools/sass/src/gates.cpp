#include "gates.h"

#include <cstdio>
#include <regex>

namespace fastattn::sass {

namespace {

GateResult check(const Rule& rule, const Kernel& k) {
  GateResult g{&rule, &k, false, ""};
  const Histogram& h = k.histogram;
  switch (rule.kind) {
    case CheckKind::NoLocal: {
      const int ldl = h.opcode("LDL"), stl = h.opcode("STL");
      const int st = k.resources.spill_store_bytes, ld = k.resources.spill_load_bytes;
      g.passed = ldl == 0 && stl == 0 && st == 0 && ld == 0;
      g.detail = "LDL=" + std::to_string(ldl) + " STL=" + std::to_string(stl) +
                 " spill stores=" + std::to_string(st) + " B spill loads=" + std::to_string(ld) +
                 " B stack=" + std::to_string(k.resources.stack_bytes) + " B (allowed: 0)";
      break;
    }
    case CheckKind::Require: {
      const int n = h.opcode(rule.opcode);
      g.passed = n > 0;
      g.detail = rule.opcode + "=" + std::to_string(n) + " (required: >= 1)";
      break;
    }
    case CheckKind::MaxCount: {
      const int n = h.opcode(rule.opcode);
      g.passed = n <= rule.limit;
      g.detail = rule.opcode + "=" + std::to_string(n) + " (allowed: <= " +
                 std::to_string(rule.limit) + ")";
      break;
    }
    case CheckKind::RequireOperand:
    case CheckKind::ForbidOperand: {
      int n = 0;
      const Instruction* first = nullptr;
      for (const auto& ins : k.code)
        if (std::regex_search(ins.operands, rule.operand)) {
          if (!first) first = &ins;
          ++n;
        }
      const bool require = rule.kind == CheckKind::RequireOperand;
      g.passed = require ? n > 0 : n == 0;
      g.detail = "instructions with operands matching /" + rule.operand_pattern + "/: " + std::to_string(n) +
                 (require ? " (required: >= 1)" : " (allowed: 0)");
      if (first) {
        char at[16];
        std::snprintf(at, sizeof at, "%04x", first->offset);
        g.detail += std::string(", first at /*") + at + "*/ " + first->mnemonic + " " + first->operands;
      }
      break;
    }
    case CheckKind::PipelinedHgmma: {
      // A pipelined chain of wgmmas closes its group once (gsb0 on its last HGMMA); serialized,
      // every HGMMA closes one and a WARPGROUP.DEPBAR waits for it before the next.
      int n = 0, closing = 0;
      for (const auto& ins : k.code)
        if (ins.mnemonic.rfind("HGMMA", 0) == 0) {
          ++n;
          closing += ins.operands.find("gsb0") != std::string::npos ? 1 : 0;
        }
      g.passed = 2 * closing <= n;
      g.detail = "HGMMA=" + std::to_string(n) + ", closing a group (gsb0)=" + std::to_string(closing) +
                 " (allowed: <= half; all of them = ptxas serialized the wgmmas)";
      break;
    }
    case CheckKind::MaxRegs: {
      const int n = k.resources.registers;
      g.passed = n <= rule.limit;
      g.detail = "registers=" + std::to_string(n) + " (budget: " + std::to_string(rule.limit) + ")";
      break;
    }
  }
  return g;
}

}  // namespace

std::vector<GateResult> evaluate_gates(const std::vector<Rule>& rules,
                                       const std::vector<Kernel>& kernels) {
  std::vector<GateResult> out;
  for (const auto& k : kernels)
    for (const auto& r : rules)
      if (r.applies_to(k.arch, k.demangled)) out.push_back(check(r, k));
  return out;
}

int print_gate_results(std::ostream& os, const std::vector<GateResult>& results,
                       std::size_t kernel_count, bool verbose) {
  int failed = 0;
  for (const auto& g : results) {
    failed += g.passed ? 0 : 1;
    if (g.passed && !verbose) continue;
    os << (g.passed ? "PASS " : "FAIL ") << g.kernel->arch << " " << g.kernel->demangled << "\n"
       << "     rule line " << g.rule->line << " `" << g.rule->text << "`: " << g.detail << "\n";
  }
  os << "sass gates: " << kernel_count << " kernels, " << results.size() << " checks, " << failed
     << " failed\n";
  return failed;
}

}  // namespace fastattn::sass
