// cuda_block_mask_support: the one switch between "the CUDA backend applies this block mask" and
// "validation refuses it there". The rule itself is the CUDA backend's (cuda/block_mask_rule.h);
// a build without CUDA kernels refuses every CUDA call with a block mask.
#include "api/cuda_block_mask.h"

#ifdef FASTATTN_WITH_CUDA
#include "cuda/block_mask_rule.h"
#endif

namespace fastattn::detail {

Status cuda_block_mask_support(const Problem& p, bool backward, bool deterministic) {
#ifdef FASTATTN_WITH_CUDA
  return cuda_backend::block_mask_support(p, backward, deterministic);
#else
  (void)p;
  (void)backward;
  (void)deterministic;
  return Status::Unsupported("mask: this build has no CUDA kernels for block-sparse masks");
#endif
}

}  // namespace fastattn::detail
