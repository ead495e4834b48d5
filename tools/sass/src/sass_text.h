// Parser for `cuobjdump -sass` listings (one or more kernels, any sm_70+ architecture).
#pragma once

#include <string_view>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

// Kernels in listing order. Instructions without both encoding words are rejected, since
// the control code would be unknown; such input throws std::runtime_error.
std::vector<KernelCode> parse_sass_listing(std::string_view text);

}  // namespace fastattn::sass
