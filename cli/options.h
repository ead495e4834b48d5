// Flags of `fastattn run`, their parsing and the defaults that depend on the device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fastattn/types.h"

namespace fastattn::cli {

struct RunOptions {
  // Problem; -1 means "the default of the chosen device" (resolve_defaults fills them).
  int64_t batch = -1, seqlen = -1, seqlen_k = -1, heads = -1, kv_heads = -1, dim = -1, dim_v = -1;
  std::optional<bool> causal;  // unset: causal unless --window is given
  int64_t window_left = -1, window_right = -1;
  bool window_set = false;
  float softcap = 0.0f;
  std::optional<float> scale;  // unset: 1/sqrt(dim)
  DType dtype = DType::BF16;

  // How to run it.
  std::optional<Device> device;  // unset: CUDA when cuda_available(), else CPU
  bool backward = false;
  bool deterministic = false;  // backward: ordered dQ accumulation (bitwise reproducible)
  int num_splits = 0;          // forward: split-KV parts (0 = the library's heuristic, 1 = unsplit)
  int iters = -1, warmup = -1;
  int check_rows = 16;
  uint64_t seed = 0;
  int threads = 0;  // CPU backend threads, 0 = all
  bool quiet = false;
  std::string json_path;
};

// Parses the arguments after `run`. Returns an error message naming the flag, or nothing.
std::optional<std::string> parse_run_options(const std::vector<std::string>& args, RunOptions& o);

// Fills every unset field for `device` and checks what can be checked before allocating.
std::optional<std::string> resolve_defaults(RunOptions& o, Device device);

const char* run_help();

}  // namespace fastattn::cli
