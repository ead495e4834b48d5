// The forward of a call with nothing to compute (no keys, no query rows, or a varlen bound of 0):
// out = 0 and lse = -inf, written by one small fill kernel; the attention kernel is not launched.
// Host-only header (no CUDA types).
#pragma once

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// Writes out (every element 0) and lse (every element -inf) when defined, on `stream` (a
// cudaStream_t; nullptr = default stream). No host synchronisation: capturable in CUDA graphs.
Status forward_empty(const AttnArgs& args, void* stream);

}  // namespace fastattn::cuda_backend
