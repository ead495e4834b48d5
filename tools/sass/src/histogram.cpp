#include "histogram.h"

#include "opcode_family.h"

namespace fastattn::sass {

int Histogram::opcode(const std::string& op) const {
  const auto it = by_opcode.find(op);
  return it == by_opcode.end() ? 0 : it->second;
}

int Histogram::family(const std::string& f) const {
  const auto it = by_family.find(f);
  return it == by_family.end() ? 0 : it->second;
}

Histogram count_instructions(const std::vector<Instruction>& code) {
  std::size_t end = code.size();
  while (end > 0 && code[end - 1].opcode() == "NOP") --end;
  Histogram h;
  for (std::size_t i = 0; i < end; ++i) {
    const std::string op = code[i].opcode();
    ++h.total;
    ++h.by_opcode[op];
    ++h.by_family[std::string(opcode_family(op))];
  }
  return h;
}

}  // namespace fastattn::sass
