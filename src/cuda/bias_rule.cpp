// The CUDA backend's bias rules. docs/masks.md (Bias) lists them for users.
#include "cuda/bias_rule.h"

#include <cstdint>
#include <string>

namespace fastattn::cuda_backend {
namespace {

// The rules on what both the args and the resolved problem say (dtype, base, splits, dims). Any strides run (the
// kernel loads key pairs by one 32-bit load where they are 4-byte aligned, else by two). A block-sparse mask
// or a bitmask with a bias runs their bias twin (block_mask_rule.h's rules apply as without a bias).
Status bias_rules(int major, DType q_dtype, DType bias_dtype, const void* bias_data, int d, int dv, int num_splits) {
  if (major != 9) return Status::Unsupported("bias: the CUDA forward with bias runs on sm90 (Hopper) only");
  if (bias_dtype != q_dtype)
    return Status::Unsupported(std::string("bias: dtype ") + dtype_name(bias_dtype) + " but the CUDA forward reads a bias "
                               "of q's dtype " + dtype_name(q_dtype) + " (convert the bias)");
  // Its narrowest load is one entry (16 bits): a base off the element size would be a misaligned-address fault.
  if (reinterpret_cast<uintptr_t>(bias_data) % dtype_size(bias_dtype) != 0)
    return Status::Unsupported("bias: the CUDA forward needs a base pointer aligned to the bias's element size");
  if (d != dv || d > 128)
    return Status::Unsupported("bias: the CUDA forward with bias takes head dims up to 128 with head_dim_v = head_dim");
  if (num_splits > 1)
    return Status::Unsupported("num_splits: the CUDA forward with bias has no split-KV; pass 0 or 1");
  return Status::Ok();
}

}  // namespace

// ALiBi runs on the bias kernels (their term computed instead of read: sm90/fwd/mainloop.cuh, sm90/bwd/bias.cuh),
// so the bias's limits bind it, in its own words.
Status alibi_rules(int major, bool with_bias, int d, int dv, int num_splits, const char* pass) {
  if (with_bias)
    return Status::Unsupported(std::string("alibi_slopes: the CUDA ") + pass + " takes ALiBi or a bias, not both (add "
                               "the ALiBi term -slope * |i + s_k - s_q - j| into the bias, or use the CPU backend)");
  if (major != 9)
    return Status::Unsupported(std::string("alibi_slopes: the CUDA ") + pass + " with ALiBi runs on sm90 (Hopper) only "
                               "(this device: sm" + std::to_string(major) + "x; the CPU backend takes it)");
  if (d != dv || d > 128)
    return Status::Unsupported(std::string("alibi_slopes: the CUDA ") + pass + " with ALiBi takes head dims up to 128 "
                               "with head_dim_v = head_dim");
  if (num_splits > 1) return Status::Unsupported("num_splits: the CUDA forward with ALiBi has no split-KV; pass 0 or 1");
  return Status::Ok();
}

Status bias_forward_support(const AttnArgs& a, int major) {
  const int d = int(a.q.shape[a.q.ndim - 1]), dv = int(a.v.shape[a.v.ndim - 1]);
  if (a.alibi_slopes.defined()) return alibi_rules(major, a.bias.defined(), d, dv, a.num_splits, "forward");
  if (!a.bias.defined()) return Status::Ok();
  return bias_rules(major, a.q.dtype, a.bias.dtype, a.bias.data, d, dv, a.num_splits);
}

Status bias_problem_support(const detail::Problem& p, int major) {
  if (p.alibi.defined()) return alibi_rules(major, p.bias.defined(), p.head_dim, p.head_dim_v, p.num_splits_arg, "forward");
  return bias_rules(major, p.dtype, p.bias.dtype, p.bias.data, p.head_dim, p.head_dim_v, p.num_splits_arg);
}

// The sm90 backward's bias kernel (sm90/bwd/bias.cuh, BiasBwdConfig): the default mode's accumulator path of
// the d 96 / 128 tiles, any bias dtype and layout (BF16 / F16 words two keys a 4-byte load where aligned).
Status bias_backward_support(const AttnArgs& a, int major) {
  const bool alibi = a.alibi_slopes.defined();
  if (!a.bias.defined() && !alibi) return Status::Ok();
  // ALiBi takes the bias kernel (its term computed): the same limits, named as ALiBi's.
  const std::string what = alibi ? "alibi_slopes: the CUDA backward with ALiBi" : "bias: the CUDA backward with a bias";
  if (alibi && a.bias.defined())
    return Status::Unsupported("alibi_slopes: the CUDA backward takes ALiBi or a bias, not both (add the ALiBi term into "
                               "the bias, or use the CPU backend)");
  if (major != 9)  // the sm80 kernels read no bias: dq / dk / dv of the unbiased scores and dbias 0
    return Status::Unsupported(what + " runs on sm90 (Hopper) only (this device: sm" + std::to_string(major) + "x)");
  const int64_t d = a.q.shape[a.q.ndim - 1], dv = a.v.shape[a.v.ndim - 1];
  if (d != dv || (d != 96 && d != 128))  // d 64: its bias kernel spilled (docs/notes/bwd-sm90.md, "Bias backward")
    return Status::Unsupported(what + " runs head dims 96 and 128 (d_v = d), not " + std::to_string(d) +
                               (dv != d ? "/" + std::to_string(dv) : ""));
  if (a.deterministic)
    return Status::Unsupported(what + " has no deterministic mode yet (deterministic=false, or the CPU backend)");
  if (a.softcap != 0.f) return Status::Unsupported(what + " takes no softcap yet");
  if (a.mask.kind == MaskKind::BlockSparse || a.mask.kind == MaskKind::DenseBitmask)
    return Status::Unsupported(what + " takes no block-sparse or bitmask mask yet");
  if (alibi) return Status::Ok();
  if (reinterpret_cast<uintptr_t>(a.bias.data) % dtype_size(a.bias.dtype) != 0)
    return Status::Unsupported("bias: the CUDA backward needs a base pointer aligned to the bias's element size");
  if (a.dbias.defined() && reinterpret_cast<uintptr_t>(a.dbias.data) % 4 != 0)  // fp32 atomic adds
    return Status::Unsupported("dbias: the CUDA backward adds into fp32 entries: it needs a 4-byte aligned base pointer");
  return Status::Ok();  // any strides: odd ones read 16-bit entries one by one (sm90/bwd/bias.cuh)
}

}  // namespace fastattn::cuda_backend
