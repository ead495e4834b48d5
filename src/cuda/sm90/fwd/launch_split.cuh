// Host launch of the Hopper forward's split-KV kernel for one (dtype, head dim): SplitBase<D>
// (launch.cuh) as a SplitConfig, whatever the problem (launch_fwd's alternative configs are tuned
// for long unsplit rows). Included only by the generated fwd_split_<dtype>_d<dim>.cu, so that each
// kernel compiles in its own unit; launch_fwd (launch.cuh) calls it through api.h.
#pragma once

#include "cuda/sm90/fwd/launch.cuh"

namespace fastattn::sm90 {

template <class T, int D>
Status launch_fwd_split(const cuda_backend::LaunchProblem& lp, int splits, cudaStream_t stream) {
  return launch_cfg<T, SplitConfig<typename SplitBase<D>::type>>(lp, stream, splits);
}

}  // namespace fastattn::sm90
