// Entry points of the CUDA backend, called by src/api after validation. Host-only header
// (no CUDA types), so the api layer compiles without nvcc.
#pragma once

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// True when kernels are compiled in and a CUDA device is present.
bool available();

// Backend-specific limits on already-validated args: arch of the device, head dims and dtypes
// instantiated in this build, 16-byte alignment of base pointers and strides (TMA), features.
Status check_forward(const AttnArgs& args);

// Runs the forward of a validated, resolved problem (its index arrays stay on the device, unread).
Status forward(const detail::Problem& problem, void* stream);

// One line: archs, head dims, dtypes and the number of kernels compiled in.
const char* build_info();

}  // namespace fastattn::cuda_backend
