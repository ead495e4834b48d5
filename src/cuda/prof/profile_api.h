// Host entry of the probed Hopper forward (issue #6): runs the forward kernel built with
// FASTATTN_LOOP_PROBES on the caller's arguments and returns the probe buffer. Host-only header
// (no CUDA types); the functions live in the fastattn_profile_kernels library, which exists only
// in CUDA builds with sm_90a (FASTATTN_WITH_PROFILE is defined for its users then).
#pragma once

#include <string>

#include "cuda/prof/probe_layout.h"
#include "fastattn/types.h"

namespace fastattn::prof {

struct ProfileRequest {
  int warmup = 2;                   // probed launches before the counted ones
  int launches = 3;                 // counted launches; the sums accumulate over them
  int trace_block[3] = {0, 0, 0};   // blockIdx of the CTA whose timestamps are kept
  int trace_skip = 0;               // of that CTA's tiles with loop iterations, how many to pass first
  bool pv_sync = true;              // also run the PV-sync variant (seed 003, method 3)
};

// One probed kernel variant's results.
struct ProbeRun {
  bool ran = false;
  std::string kernel;               // mangled name of the probed kernel
  double ms = 0;                    // mean time of one counted launch
  bool output_identical = false;    // out and lse bitwise equal to the default kernel's
  ProbeBuffer buffer{};
};

struct ProfileResult {
  std::string default_kernel;       // the library's kernel whose launch was replayed
  int grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  unsigned smem_bytes = 0;
  int block_m = 0, block_n = 0, head_dim = 0;
  bool ping_pong = false;
  double default_ms = 0;            // the default kernel, same launch, same stream
  ProbeRun pipeline;                // the kernel as it is, with probes
  ProbeRun pv_sync;                 // wait<0> moved before the softmax (when requested)
};

// Which (dtype, head dim) pairs have a probed kernel in this build, e.g. "bf16/d128 fp16/d128".
std::string probed_kernels();
bool probed_kernel_built(DType dtype, int head_dim);

// Validates `args` like forward(), runs the library's forward once (the reference output), captures
// its launch in a CUDA graph to take the exact grid and kernel arguments, then launches the probed
// kernel(s) with them. `args` must be CUDA tensors; out and lse are overwritten (with the same
// values). `stream` is a cudaStream_t or nullptr (a private stream is used for the capture).
Status profile_forward(const AttnArgs& args, const ProfileRequest& request, ProfileResult* result,
                       void* stream = nullptr);

}  // namespace fastattn::prof
