// A kernel launch that may start early behind the kernel ahead on the stream (programmatic dependent
// launch, sm_90): with `early`, the kernel is scheduled once every CTA of the kernel ahead has called
// grid_dependents_launch (common/grid_dependency.cuh) or exited, and must call grid_dependency_wait
// before it reads what that kernel wrote; without, a plain stream-ordered launch.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace fastattn::cuda_backend {

template <class... Params, class... Args>
cudaError_t launch_maybe_early(bool early, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                               cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute serialization[1];
  serialization[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  serialization[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = serialization;
  cfg.numAttrs = early ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace fastattn::cuda_backend
