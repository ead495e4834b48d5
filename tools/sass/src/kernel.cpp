#include "kernel.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace fastattn::sass {

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

Kernel make_kernel(KernelCode code, const Resources& res,
                   const std::set<std::uint32_t>& spill_offsets) {
  Kernel k;
  k.name = std::move(code.name);
  k.demangled = demangle(k.name);
  k.arch = std::move(code.arch);
  k.code = std::move(code.code);
  k.resources = res;
  add_spill_bytes(k.code, spill_offsets, k.resources);
  k.histogram = count_instructions(k.code);
  return k;
}

}  // namespace fastattn::sass
