// ---------------------------------------------------------------------------------------------
// cuda_takes_block_mask: the ONE switch between "the CUDA backend applies block masks" and
// "validation refuses them there". The sm90 block-sparse forward replaces this body (a file of its
// own so that merge touches nothing else). Compiled in every build: validation calls it.
// ---------------------------------------------------------------------------------------------
#include "api/cuda_block_mask.h"

namespace fastattn::detail {

bool cuda_takes_block_mask(const Problem& /*p*/, bool /*backward*/) {
  return false;  // no CUDA kernel reads a block mask yet
}

}  // namespace fastattn::detail
