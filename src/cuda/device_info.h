// Facts about the current CUDA device that launches need, cached per device.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda/force_arch_rule.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// Multiprocessors of the current device.
Status sm_count(int* out);

// L2 cache bytes of the current device.
Status l2_bytes(int* out);

// Peak HBM bandwidth of the current device in bytes / s (memory clock x bus width x 2: double data
// rate); 0 where the device does not report them (the split heuristic then falls back).
Status hbm_bytes_per_s(double* out);

// Shared memory bytes one multiprocessor of the current device holds (all its CTAs together).
Status smem_per_sm(int* out);

// The compute capability major the dispatch by arch uses (9: Hopper, 8: Ampere / Ada): the current
// device's, or a lower one forced for testing (forced_arch_major).
Status compute_major(int* out);

// Forcing an older arch's kernels on a newer GPU (tests and benchmarks: the sm80 path runs on an H100
// from its compute_80 PTX). Starts from the environment variable FASTATTN_FORCE_ARCH (e.g. "80"; read
// once, at the first call); set_forced_arch_major overrides it (0: the device's own). A forced major
// applies only below the device's own (an sm_90 kernel cannot run on an sm_80 GPU).
// The value is parsed by parse_forced_arch (cuda/force_arch_rule.h); one that names no arch makes
// compute_major, and so every CUDA call, fail with a message naming the variable.
int forced_arch_major();
void set_forced_arch_major(int major);
// Tests: the next forced_arch_major reads FASTATTN_FORCE_ARCH again.
void reread_forced_arch();

// CTAs of a persistent grid over `tiles` work items: one per multiprocessor, fewer when there is
// less work, and at most FASTATTN_MAX_CTAS when that environment variable is set (a testing and
// profiling knob: the GPU tests use it to make every CTA walk many tiles).
Status persistent_grid(int tiles, int* ctas);

// Per-device caches cover devices 0 .. kMaxCachedDevices - 1; a device past them asks every time.
constexpr int kMaxCachedDevices = 64;

// The devices on which a kernel's attribute was set already (bit d: device d). One per kernel
// instantiation, static in its launcher.
struct PerDeviceFlags {
  std::atomic<uint64_t> bits{0};
};

// Raises `kernel`'s dynamic shared memory limit to `bytes` on the current device, once per device:
// a function's attributes belong to a device's context, so a process that launches on a second GPU
// must set them there too.
Status set_max_dynamic_smem(const void* kernel, int bytes, PerDeviceFlags& done);

// The current device's index (cudaGetDevice), as a Status.
Status current_device(int* dev);

}  // namespace fastattn::cuda_backend
