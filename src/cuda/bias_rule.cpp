// The CUDA backend's bias rules. docs/masks.md (Bias) lists them for users.
#include "cuda/bias_rule.h"

#include <cstdint>
#include <string>

namespace fastattn::cuda_backend {

Status bias_forward_support(const AttnArgs& a, int major) {
  (void)major;
  if (!a.bias.defined()) return Status::Ok();
  return Status::Unsupported("bias: the CUDA forward takes no additive bias yet (the CPU and reference backends do)");
}

// The sm90 backward's bias kernel (sm90/bwd/bias.cuh, BiasBwdConfig): the default mode's accumulator path of
// the d 96 / 128 tiles; BF16 / F16 bias words are read two keys at a time (4-byte loads).
Status bias_backward_support(const AttnArgs& a) {
  if (!a.bias.defined()) return Status::Ok();
  const int64_t d = a.q.shape[a.q.ndim - 1], dv = a.v.shape[a.v.ndim - 1];
  if (d != dv || (d != 96 && d != 128))  // d 64: its bias kernel spilled (docs/notes/bwd-sm90.md, "Bias backward")
    return Status::Unsupported("bias: the CUDA backward with a bias runs head dims 96 and 128 (d_v = d), not " +
                               std::to_string(d) + (dv != d ? "/" + std::to_string(dv) : ""));
  if (a.deterministic)
    return Status::Unsupported("bias: the CUDA backward with a bias has no deterministic mode yet (deterministic=false, "
                               "or the CPU backend)");
  if (a.softcap != 0.f) return Status::Unsupported("bias: the CUDA backward with a bias takes no softcap yet");
  if (a.mask.kind == MaskKind::BlockSparse || a.mask.kind == MaskKind::DenseBitmask)
    return Status::Unsupported("bias: the CUDA backward with a bias takes no block-sparse or bitmask mask yet");
  if (a.bias.dtype != DType::F32) {  // 4-byte loads of two 16-bit entries
    bool even = reinterpret_cast<uintptr_t>(a.bias.data) % 4 == 0;
    for (int i = 0; i < 3; ++i) even = even && (a.bias.shape[i] == 1 || a.bias.stride[i] % 2 == 0);
    if (!even)
      return Status::Unsupported("bias: the CUDA backward reads a BF16 / F16 bias two entries at a time: it needs a "
                                 "4-byte aligned base pointer and even strides");
  }
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
