// One disassembled SASS instruction and the kernel that holds it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control_code.h"

namespace fastattn::sass {

struct Instruction {
  std::uint32_t offset = 0;   // byte offset inside the kernel's .text
  std::string predicate;      // "@P0", "@!UP1" or empty
  std::string mnemonic;       // opcode with modifiers, e.g. "LDG.E.128"
  std::string operands;       // everything after the mnemonic, without the ';'
  std::uint64_t low = 0;      // first 64-bit word of the encoding
  std::uint64_t high = 0;     // second word: the control field lives here
  ControlCode control;

  // Opcode without modifiers: "LDG" for "LDG.E.128".
  std::string opcode() const { return mnemonic.substr(0, mnemonic.find('.')); }
  // Target of a direct branch (BRA/BRX/CALL/...); nullopt when it has none.
  std::optional<std::uint32_t> branch_target() const;
};

struct KernelCode {
  std::string name;   // mangled symbol
  std::string arch;   // "sm_90a", "sm_80", ...
  std::vector<Instruction> code;
};

}  // namespace fastattn::sass
