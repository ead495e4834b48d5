#include "dataflow_check.h"

#include <cctype>
#include <cstdio>
#include <set>

namespace fastattn::sass {

namespace {

// Loads whose latency the hardware cannot fix, so ptxas must track them with a scoreboard.
bool variable_latency_producer(const std::string& op) {
  return op == "LDG" || op == "LDS" || op == "LDL" || op == "LDSM" || op == "MUFU" || op == "S2R" ||
         op == "LDC";
}

bool ends_block(const Instruction& ins) {
  const auto op = ins.opcode();
  return op == "BRA" || op == "BRX" || op == "JMP" || op == "JMX" || op == "CALL" || op == "RET" ||
         op == "EXIT" || op == "BSYNC" || op == "WARPSYNC";
}

int destination_width(const Instruction& ins) {
  const auto& m = ins.mnemonic;
  if (ins.opcode() == "LDSM") return m.find(".4") != std::string::npos ? 4 : m.find(".2") != std::string::npos ? 2 : 1;
  if (m.find(".128") != std::string::npos) return 4;
  if (m.find(".64") != std::string::npos) return 2;
  return 1;
}

// "@P0" and "@!P0" (or "@UP1" and "@!UP1"): guards that never hold together.
bool complementary(const std::string& a, const std::string& b) {
  if (a.size() < 2 || b.size() < 2) return false;
  const std::string ra = a.substr(a[1] == '!' ? 2 : 1), rb = b.substr(b[1] == '!' ? 2 : 1);
  return ra == rb && (a[1] == '!') != (b[1] == '!');
}

// Whether `operands` name predicate register `guard` ("@!P0" -> P0), e.g. as an ISETP destination.
bool names_predicate(const std::string& operands, const std::string& guard) {
  const std::string reg = guard.substr(guard[1] == '!' ? 2 : 1);
  for (std::size_t at = operands.find(reg); at != std::string::npos; at = operands.find(reg, at + 1)) {
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(operands[at - 1]));
    const std::size_t end = at + reg.size();
    const bool right = end >= operands.size() || !std::isalnum(static_cast<unsigned char>(operands[end]));
    if (left && right) return true;
  }
  return false;
}

std::string describe(const Instruction& ins) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%04x ", ins.offset);
  return b + ins.mnemonic;
}

}  // namespace

std::vector<int> registers_named(const std::string& s) {
  std::vector<int> regs;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool boundary = i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_');
    if (s[i] != 'R' || !boundary || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    std::size_t j = i + 1;
    int r = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) r = r * 10 + (s[j++] - '0');
    const int width = s.compare(j, 4, ".128") == 0 ? 4 : s.compare(j, 3, ".64") == 0 ? 2 : 1;
    for (int w = 0; w < width; ++w) regs.push_back(r + w);
    i = j - 1;
  }
  return regs;
}

DataflowReport check_load_waits(const std::vector<Instruction>& code, const Decoder& decode) {
  std::set<std::uint32_t> targets;
  for (const auto& ins : code)
    if (const auto t = ins.branch_target()) targets.insert(*t);

  DataflowReport rep;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const auto& p = code[i];
    const int sb = decode(p.high).write_sb;
    if (!variable_latency_producer(p.opcode()) || sb == kNoScoreboard) continue;
    const auto first = registers_named(p.operands.substr(0, p.operands.find(',')));
    if (first.size() != 1) continue;  // RZ or an address-only form: nothing to follow
    std::set<int> dest;
    for (int w = 0; w < destination_width(p); ++w) dest.insert(first[0] + w);

    bool waited = false;
    bool guard_rewritten = false;  // the load's predicate named since the load
    for (std::size_t j = i + 1; j < code.size(); ++j) {
      const auto& c = code[j];
      if (targets.count(c.offset)) break;
      const auto cc = decode(c.high);
      waited = waited || cc.waits_on(sb) ||
               (c.opcode() == "DEPBAR" && c.operands.find("SB" + std::to_string(sb)) != std::string::npos);
      // `@P0 LDG R24` then `@!P0 MOV R24, ...` (a select between a load and a constant): the two
      // never both run, so the move is no use of the load's result.
      if (complementary(p.predicate, c.predicate) && !guard_rewritten) continue;
      if (!p.predicate.empty() && names_predicate(c.operands, p.predicate)) guard_rewritten = true;
      bool touches = false;
      for (int r : registers_named(c.operands)) touches = touches || dest.count(r);
      if (touches) {
        ++rep.checked;
        if (!waited)
          rep.violations.push_back(describe(p) + " W" + std::to_string(sb) + " -> " + describe(c) +
                                   ": no wait on SB" + std::to_string(sb));
        break;
      }
      if (ends_block(c)) break;
    }
  }
  return rep;
}

}  // namespace fastattn::sass
