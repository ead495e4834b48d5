// Facts about the current CUDA device that launches need, cached per device.
#pragma once

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// Multiprocessors of the current device.
Status sm_count(int* out);

// L2 cache bytes of the current device.
Status l2_bytes(int* out);

// The current device's compute capability major (9: Hopper), for the dispatch by arch.
Status compute_major(int* out);

// CTAs of a persistent grid over `tiles` work items: one per multiprocessor, fewer when there is
// less work, and at most FASTATTN_MAX_CTAS when that environment variable is set (a testing and
// profiling knob: the GPU tests use it to make every CTA walk many tiles).
Status persistent_grid(int tiles, int* ctas);

}  // namespace fastattn::cuda_backend
