// Per-kernel resources: from `cuobjdump -res-usage` and the spill annotations of `.nv.info`.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "instruction.h"

namespace fastattn::sass {

struct Resources {
  int registers = 0;
  int stack_bytes = 0;    // per-thread stack frame
  int shared_bytes = 0;   // static shared memory (dynamic smem is a launch argument)
  int local_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

// "Function NAME:" followed by "REG:.. STACK:.. SHARED:.. LOCAL:..", keyed by mangled name.
std::map<std::string, Resources> parse_resource_usage(std::string_view text);

// Offsets of the instructions ptxas marked as spill/refill (EIATTR_ANNOTATIONS "SpillRefill"
// in `cuobjdump -elf`), keyed by mangled name.
std::map<std::string, std::set<std::uint32_t>> parse_spill_offsets(std::string_view elf_dump);

// Bytes moved by one LDL/STL: from its width modifier (.64, .128, .U8, ...), 4 by default.
int local_access_bytes(const Instruction& ins);

// Adds the widths of the STL/LDL at `offsets` to res.spill_{store,load}_bytes. ptxas counts
// spills the same way, so the sums equal its "bytes spill stores/loads".
void add_spill_bytes(const std::vector<Instruction>& code, const std::set<std::uint32_t>& offsets,
                     Resources& res);

}  // namespace fastattn::sass
