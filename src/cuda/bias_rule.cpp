// The CUDA backend's bias rules. docs/masks.md (Bias) lists them for users.
#include "cuda/bias_rule.h"

#include <cstdint>
#include <string>

namespace fastattn::cuda_backend {
namespace {

// The rules on what both the args and the resolved problem say (dtype, splits, dims). Any strides run (the
// kernel loads key pairs by one 32-bit load where they are 4-byte aligned, else by two). A block-sparse mask
// or a bitmask with a bias runs their bias twin (block_mask_rule.h's rules apply as without a bias).
Status bias_rules(int major, DType q_dtype, DType bias_dtype, int d, int dv, int num_splits) {
  if (major != 9) return Status::Unsupported("bias: the CUDA forward with bias runs on sm90 (Hopper) only");
  if (bias_dtype != q_dtype)
    return Status::Unsupported(std::string("bias: dtype ") + dtype_name(bias_dtype) + " but the CUDA forward reads a bias "
                               "of q's dtype " + dtype_name(q_dtype) + " (convert the bias)");
  if (d != dv || d > 128)
    return Status::Unsupported("bias: the CUDA forward with bias takes head dims up to 128 with head_dim_v = head_dim");
  if (num_splits > 1)
    return Status::Unsupported("num_splits: the CUDA forward with bias has no split-KV; pass 0 or 1");
  return Status::Ok();
}

}  // namespace

Status bias_forward_support(const AttnArgs& a, int major) {
  if (!a.bias.defined()) return Status::Ok();
  return bias_rules(major, a.q.dtype, a.bias.dtype, int(a.q.shape[a.q.ndim - 1]), int(a.v.shape[a.v.ndim - 1]),
                    a.num_splits);
}

Status bias_problem_support(const detail::Problem& p, int major) {
  return bias_rules(major, p.dtype, p.bias.dtype, p.head_dim, p.head_dim_v, p.num_splits_arg);
}

Status bias_backward_support(const AttnArgs& a) {
  if (!a.bias.defined()) return Status::Ok();
  return Status::Unsupported("bias: the CUDA backward takes no additive bias yet (the CPU and reference backends do)");
}

}  // namespace fastattn::cuda_backend
