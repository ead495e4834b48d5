// Finding and running the CUDA binary utilities (cuobjdump, nvdisasm).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fastattn::sass {

// Search order: $FASTATTN_CUOBJDUMP (resp. $FASTATTN_NVDISASM), PATH, /usr/local/cuda/bin,
// then the bin/ folders of the nvidia-cuda-* wheels that tools/sass/install-disasm.sh installs
// (python3's site-packages, system and user).
std::optional<std::string> find_cuobjdump();
std::optional<std::string> find_nvdisasm();

struct CommandResult {
  int exit_code = -1;
  std::string out;   // stdout
  std::string err;   // stderr
};

// Runs `argv` without a shell, capturing stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& workdir = "");

}  // namespace fastattn::sass
