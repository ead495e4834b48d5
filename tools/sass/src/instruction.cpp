#include "instruction.h"

#include <cstdlib>

namespace fastattn::sass {

std::optional<std::uint32_t> Instruction::branch_target() const {
  const std::string op = opcode();
  if (op != "BRA" && op != "CALL" && op != "JMP" && op != "BRX" && op != "JMX") return std::nullopt;
  // cuobjdump prints the absolute target as the last hexadecimal operand: "BRA 0x1d0".
  const auto pos = operands.rfind("0x");
  if (pos == std::string::npos) return std::nullopt;
  if (pos > 0 && operands[pos - 1] == '-') return std::nullopt;  // relative or negative forms
  char* end = nullptr;
  const unsigned long v = std::strtoul(operands.c_str() + pos + 2, &end, 16);
  return static_cast<std::uint32_t>(v);
}

}  // namespace fastattn::sass
