// The gate rules file: one check per line, applied to every kernel it matches.
//
//   <arch> <kernel-regex> <check> [args...] [except=<regex>]
//
//   arch     "*" or a comma list such as "sm_90a" or "sm_80,sm_86"
//   regex    ECMAScript, searched in the demangled kernel name (no spaces)
//   check    no-local           no LDL/STL instruction and no spill bytes
//            require OP         at least one OP instruction (OP without modifiers)
//            max OP N           at most N OP instructions
//            max-regs N         at most N registers per thread
//            require-operand RE at least one instruction whose operands match RE (e.g. SR_CLOCK)
//            forbid-operand RE  no instruction whose operands match RE
//            pipelined-hgmma    at most half of the HGMMAs close a wgmma group (gsb0): ptxas
//                               serializes every wgmma when it runs short of registers for the
//                               pipeline (info C7511/C7512, not an error), and each then waits
//   except   kernels whose demangled name matches are skipped
//
// '#' starts a comment.
#pragma once

#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastattn::sass {

struct RuleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class CheckKind { NoLocal, Require, MaxCount, MaxRegs, RequireOperand, ForbidOperand, PipelinedHgmma };

struct Rule {
  int line = 0;
  std::string text;                 // the line as written, for messages
  std::vector<std::string> archs;   // empty = any
  std::string kernel_pattern;
  std::regex kernel;
  std::string except_pattern;       // empty = none
  std::regex except;
  CheckKind kind = CheckKind::NoLocal;
  std::string opcode;
  int limit = 0;
  std::string operand_pattern;      // the operand checks: searched in each instruction's operands
  std::regex operand;

  bool applies_to(const std::string& arch, const std::string& demangled) const;
};

// Throws RuleError naming the line on any malformed rule.
std::vector<Rule> parse_rules(const std::string& text);
std::vector<Rule> load_rules(const std::string& path);

}  // namespace fastattn::sass
