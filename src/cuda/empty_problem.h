// Calls with nothing to compute (no keys, no query rows, or a varlen bound of 0): the forward writes
// out = 0 and lse = -inf, the backward dq = dk = dv = 0 (and dbias = 0), each by one small fill kernel;
// no attention kernel is launched. Host-only header (no CUDA types).
#pragma once

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// Writes out (every element 0) and lse (every element -inf) when defined, on `stream` (a
// cudaStream_t; nullptr = default stream). No host synchronisation: capturable in CUDA graphs.
Status forward_empty(const AttnArgs& args, void* stream);

// Writes dq, dk, dv (and args.dbias when defined) with zeros, on `stream`, likewise capturable.
Status backward_empty(const AttnArgs& args, const Tensor& dq, const Tensor& dk, const Tensor& dv, void* stream);

}  // namespace fastattn::cuda_backend
