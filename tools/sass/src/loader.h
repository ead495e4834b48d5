// Turns a binary of ours (.so, .a, .o, executable or cubin) into per-kernel records.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "kernel.h"

namespace fastattn::sass {

struct ToolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// All kernels of all architectures in `path`, sorted by demangled name then arch. A host-only
// file gives an empty list. Throws ToolError when cuobjdump is missing or fails.
std::vector<Kernel> load_kernels(const std::string& path);

// True when the file is a CUDA ELF (cubin) rather than a host object holding fatbins.
bool is_cubin(const std::string& path);

}  // namespace fastattn::sass
