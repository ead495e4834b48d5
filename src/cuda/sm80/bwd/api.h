// Declaration of the Ampere (sm_80) backward launcher; its (dtype, d) instances are compiled in the
// generated sm80/bwd_<dtype>_d<d>.cu files and listed in sm80/bwd_dispatch.inc (src/cuda/sources.cmake).
// What it does not take (deterministic mode, softcap, block-sparse masks and bitmasks, d 128 on a
// device whose SM has less smem than the tile) check_backward refuses by name before it is reached
// (bwd_backend.cu).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/bwd_params.h"
#include "cuda/launch_plan.h"
#include "fastattn/types.h"

namespace fastattn::sm80 {
// The q-block rows of the sm80 backward's workspace (Sm80BwdConfig::kBlockM; the host pads by it).
constexpr int kBwdBlockM = 64;
// Smem of the sm80 backward's CTA at head dim d (Sm80BwdConfig::kSmemBytes; the host's refusal on small SMs).
constexpr int bwd_smem_bytes(int d) { return 2 * 128 * 2 * d + 2 * (2 * 64 * 2 * d + 2 * 64 * 4) + 128 * 64 * 2; }

template <class T, int D>
Status launch_bwd(const detail::Problem& problem, const detail::GradOperands& grads, const cuda_backend::BwdParams& p,
                  cudaStream_t stream);
}
