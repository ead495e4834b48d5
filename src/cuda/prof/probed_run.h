// Between the profiling entry (profile_forward.cu) and the probed kernel instances
// (probed_<dtype>_d<dim>[_pvsync].cu, generated from probed_inst.cu.in): the library's own launch of
// the default kernel, as captured, and the function each instance provides to replay it.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/common/fwd_params.h"
#include "cuda/prof/profile_api.h"

namespace fastattn::prof {

// Grid, block, dynamic smem and argument values of one captured fwd_kernel launch. The probed
// kernel has the same parameter list, so it runs on exactly what the library computed.
struct CapturedLaunch {
  CUtensorMap tq, tk, tv;
  cuda_backend::FwdParams p;
  dim3 grid, block;
  unsigned smem = 0;
};

// Launches fwd_kernel<T, ProbedConfig<D, PvSync>> request.warmup + request.launches times on
// `stream`, with the probe buffer cleared before the counted launches, and reads the buffer back.
// Fills run (and the tile shape in result).
template <class T, int D, bool PvSync>
Status run_probed(const CapturedLaunch& launch, const ProfileRequest& request, ProbeRun* run,
                  ProfileResult* result, cudaStream_t stream);

}  // namespace fastattn::prof
