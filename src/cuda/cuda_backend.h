// Entry points of the CUDA backend, called by src/api after validation. Host-only header
// (no CUDA types), so the api layer compiles without nvcc.
#pragma once

#include <string>

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// True when kernels are compiled in and a CUDA device is present.
bool available();

// Backend-specific limits on already-validated args: arch of the device, head dims and dtypes
// instantiated in this build, 16-byte alignment of base pointers and strides (TMA), features.
Status check_forward(const AttnArgs& args);

// The sm80 (Ampere / Ada) forward's refusals by name: block-sparse masks and element bitmasks
// (check_forward asks it on a device of major 8, or one forced so: FASTATTN_FORCE_ARCH).
Status sm80_limits(const AttnArgs& args);
// The backward's limits on validated args (as check_forward, plus the head dims the backward
// kernels hold), and on the gradient tensors.
Status check_backward(const AttnArgs& args);
Status check_backward_grads(const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv);

// Runs the backward of a validated, resolved problem: dq, dk, dv from q, k, v, out, lse and dout
// (`deterministic`: ordered dQ adds). Its workspace (fp32 dQ accumulator, per-row scalars) is
// allocated with cudaMallocAsync and freed with cudaFreeAsync on `stream`, so the call is
// stream-ordered and can be captured in a CUDA graph.
Status backward(const detail::Problem& problem, const detail::GradOperands& grads, bool deterministic, void* stream);

// Runs the forward of a validated, resolved problem (its index arrays stay on the device, unread).
Status forward(const detail::Problem& problem, void* stream);

// One line: archs, head dims, dtypes and the number of kernels compiled in.
const char* build_info();

}  // namespace fastattn::cuda_backend
