// Groups SASS opcodes into the families reviewers ask about (tensor core, predicate, FP32, ...).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fastattn::sass {

// Family of an opcode without modifiers, e.g. "mem.global" for "LDG", "tensor" for "HGMMA".
// Unknown opcodes go to "other" so a new instruction never disappears from the counts.
std::string_view opcode_family(std::string_view opcode);

// Every family name in report order.
const std::vector<std::string_view>& family_names();

}  // namespace fastattn::sass
