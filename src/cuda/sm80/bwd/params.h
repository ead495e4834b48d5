// The Ampere backward kernel's parameter struct: the backward's shared fields (BwdParams: the problem,
// dO and the gradients, the workspace of lse_log2 / D / the dQ accumulator) and the plain-pointer
// operands that cp.async reads (the Hopper kernels take TMA maps for Q, K and V instead).
#pragma once

#include "cuda/common/bwd_params.h"
#include "cuda/sm80/fwd/params.h"  // Operand80

namespace fastattn::sm80 {

struct Sm80BwdParams {
  cuda_backend::BwdParams bwd;
  Operand80 q, k, v;
};

}  // namespace fastattn::sm80
