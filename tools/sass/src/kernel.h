// Everything the auditor knows about one kernel compiled for one architecture.
#pragma once

#include <string>
#include <vector>

#include "histogram.h"
#include "instruction.h"
#include "resources.h"

namespace fastattn::sass {

struct Kernel {
  std::string name;        // mangled symbol
  std::string demangled;   // readable name; rules and reports match against this
  std::string arch;        // "sm_90a"
  Resources resources;
  std::vector<Instruction> code;
  Histogram histogram;

  std::string key() const { return arch + " " + name; }  // unique within one build
};

// Readable form of a mangled symbol; the input itself when it is not a C++ name.
std::string demangle(const std::string& mangled);

// Fills demangled name, spill bytes and histogram from the raw parts.
Kernel make_kernel(KernelCode code, const Resources& res,
                   const std::set<std::uint32_t>& spill_offsets);

}  // namespace fastattn::sass
