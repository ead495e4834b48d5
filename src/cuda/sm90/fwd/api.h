// Declaration of the Hopper forward launcher; its (dtype, d, d_v) instances are compiled in the
// generated fwd_<dtype>_d<d>[_v<d_v>].cu files, and listed in the generated fwd_dispatch.inc
// (fwd_block_sparse_dispatch.inc: the block-sparse rows).
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch_plan.h"
#include "cuda/sched/split_plan.h"
#include "fastattn/types.h"

namespace fastattn::sm90 {
template <class T, int D, int DV = D>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
// Block-sparse masks (Problem::blocks): d <= 128 with d_v = d (fwd_masked_<dtype>_d<d>.cu).
template <class T, int D, int DV = D>
Status launch_fwd_block_sparse(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
// Element bitmasks (Problem::bits): d <= 128 with d_v = d (fwd_masked_<dtype>_d<d>.cu).
template <class T, int D, int DV = D>
Status launch_fwd_bitmask(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
// Additive bias (Problem::bias): d <= 128 with d_v = d (fwd_masked_<dtype>_d<d>.cu).
template <class T, int D, int DV = D>
Status launch_fwd_bias(const cuda_backend::LaunchProblem& lp, cudaStream_t stream);
template <class T, int D, int DV = D>
Status launch_fwd_split(const cuda_backend::LaunchProblem& lp, const cuda_backend::SplitPlan& plan, cudaStream_t stream);
}
