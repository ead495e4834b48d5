// Between the profiling entry (profile_forward.cu) and the probed kernel instances
// (probed_<dtype>_d<dim>[_pvsync].cu, generated from probed_inst.cu.in): the library's own launch of
// the default kernel, as captured, and the function each instance provides to replay it.
#pragma once

#include <cuda_runtime.h>

#include "cuda/prof/profile_api.h"

namespace fastattn::prof {

// The library's forward as captured in a CUDA graph, and its one fwd_kernel launch: grid, block,
// dynamic smem and argument values. The probed kernel has the same parameter list, so a copy of the
// graph with that node's function swapped runs it on exactly what the library computed, with any
// other node of the capture (a memset, a copy) replayed as it was.
struct CapturedLaunch {
  cudaGraph_t graph = nullptr;
  cudaGraphNode_t node = nullptr;
  cudaKernelNodeParams params{};
};

// Replays the captured graph with fwd_kernel<T, ProbedConfig<D, PvSync>> in place of the library's
// kernel, request.warmup + request.launches times on `stream`, with the probe buffer cleared before
// the counted launches, and reads the buffer back. Fills run (and the tile shape in result).
template <class T, int D, bool PvSync>
Status run_probed(const CapturedLaunch& launch, const ProfileRequest& request, ProbeRun* run,
                  ProfileResult* result, cudaStream_t stream);

}  // namespace fastattn::prof
