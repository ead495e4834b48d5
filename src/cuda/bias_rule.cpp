// The CUDA backend's bias rules. docs/masks.md (Bias) lists them for users.
#include "cuda/bias_rule.h"

namespace fastattn::cuda_backend {

Status bias_forward_support(const AttnArgs& a, int major) {
  (void)major;
  if (!a.bias.defined()) return Status::Ok();
  return Status::Unsupported("bias: the CUDA forward takes no additive bias yet (the CPU and reference backends do)");
}

Status bias_backward_support(const AttnArgs& a) {
  if (!a.bias.defined()) return Status::Ok();
  return Status::Unsupported("bias: the CUDA backward takes no additive bias yet (the CPU and reference backends do)");
}

}  // namespace fastattn::cuda_backend
