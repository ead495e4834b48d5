// Call-level validation rules, in the order a user most likely needs to hear about them.
// Every failure returns before any output is written; the message names the argument and rule.
#include "api/validate.h"
#include "fastattn/fastattn.h"  // the public declarations (exported) of validate_forward / _backward

#include <algorithm>
#include <cmath>

#include "api/bias_checks.h"
#include "api/block_mask_checks.h"
#include "api/cuda_block_mask.h"
#include "api/message.h"
#include "api/tensor_checks.h"

#ifdef FASTATTN_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace fastattn::detail {
namespace {

constexpr int32_t kMaxCpuHeadDim = 1024;
// More splits than this are no schedule (a split of every key block at s_k 128k with 128-key blocks); an absurd
// count would otherwise fail in the launch, after forward_kvcache has written the cache.
constexpr int32_t kMaxNumSplits = 1024;

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::CPU: return "cpu";
    case Backend::CUDA: return "cuda";
    case Backend::Reference: return "reference";
  }
  return "unknown";
}

}  // namespace

Status check_scalars(const AttnArgs& a) {
  if (a.mask.kind != MaskKind::None && a.mask.kind != MaskKind::BlockSparse && a.mask.kind != MaskKind::DenseBitmask) {
    return Status::Unsupported(msg("mask: kind ", int32_t(a.mask.kind),
                                   " is not supported (none, dense bitmask and block-sparse are; an additive bias is "
                                   "AttnArgs::bias, which combines with any of them)"));
  }
  const int32_t be = int32_t(a.backend);
  if (be < 0 || be > 3) {
    return Status::Invalid(msg("backend: unknown code ", be, " (expected auto, cpu, cuda or reference)"));
  }
  if (a.num_threads < 0) {
    return Status::Invalid(msg("num_threads: must be >= 0 (0 = all hardware threads) but got ",
                               a.num_threads));
  }
  if (a.num_splits < 0 || a.num_splits > kMaxNumSplits) {
    return Status::Invalid(msg("num_splits: must be in [0, ", kMaxNumSplits, "] (0 = chosen from the problem) but got ",
                               a.num_splits));
  }
  if (!std::isnan(a.softmax_scale) && !(std::isfinite(a.softmax_scale) && a.softmax_scale >= 0)) {
    return Status::Invalid(msg("softmax_scale: must be finite and >= 0 (NaN selects 1/sqrt(head_dim)) but got ",
                               a.softmax_scale));
  }
  if (!(std::isfinite(a.softcap) && a.softcap >= 0)) {
    return Status::Invalid(msg("softcap: must be finite and >= 0 (0 = off) but got ", a.softcap));
  }
  if (a.window_left < -1) {
    return Status::Invalid(msg("window_left: must be >= -1 (-1 = unbounded) but got ", a.window_left));
  }
  if (a.window_right < -1) {
    return Status::Invalid(msg("window_right: must be >= -1 (-1 = unbounded) but got ", a.window_right));
  }
  return Status::Ok();
}

namespace {

// q, k, v, out (and lse when `need_lse` or given): forms, dtypes, shapes, GQA ratio, devices.
Status check_tensors(const AttnArgs& a, bool varlen, bool need_lse) {
  const int32_t nd = varlen ? 3 : 4;
  const char* qdims = varlen ? "(total_q, heads, head_dim)" : "(batch, seqlen, heads, head_dim)";
  const char* kdims = varlen ? "(total_k, heads, head_dim)" : "(batch, seqlen, heads, head_dim)";
  Status st = check_form("q", a.q, nd, qdims);
  if (st.ok()) st = check_form("k", a.k, nd, kdims);
  if (st.ok()) st = check_form("v", a.v, nd, kdims);
  if (st.ok()) st = check_form("out", a.out, nd, qdims);
  if (!st.ok()) return st;

  st = check_dtype("k", a.k, a.q.dtype, "q, k, v must share a dtype");
  if (st.ok()) st = check_dtype("v", a.v, a.q.dtype, "q, k, v must share a dtype");
  if (st.ok()) st = check_dtype("out", a.out, a.q.dtype, "out has q's dtype");
  if (!st.ok()) return st;

  const int hd = varlen ? 1 : 2;  // heads axis
  const int64_t hq = a.q.shape[hd], hkv = a.k.shape[hd];
  const int64_t d = a.q.shape[hd + 1], dv = a.v.shape[hd + 1];
  if (varlen) {
    st = check_shape("k", a.k, {a.k.shape[0], hkv, d}, "(total_k, heads_kv, head_dim of q)");
    if (st.ok()) st = check_shape("v", a.v, {a.k.shape[0], hkv, dv}, "(total_k of k, heads_kv of k, head_dim_v)");
    if (st.ok()) st = check_shape("out", a.out, {a.q.shape[0], hq, dv}, "(total_q, heads_q, head_dim_v)");
  } else {
    const int64_t b = a.q.shape[0], sk = a.k.shape[1];
    st = check_shape("k", a.k, {b, sk, hkv, d}, "(batch of q, seqlen_k, heads_kv, head_dim of q)");
    if (st.ok()) st = check_shape("v", a.v, {b, sk, hkv, dv}, "(batch, seqlen_k, heads_kv of k, head_dim_v)");
    if (st.ok()) st = check_shape("out", a.out, {b, a.q.shape[1], hq, dv}, "(batch, seqlen_q, heads_q, head_dim_v)");
  }
  if (!st.ok()) return st;
  if (hkv < 1 || hq % hkv != 0) {
    return Status::Invalid(msg("q: heads ", hq, " is not a multiple of k's heads ", hkv,
                               " (GQA needs heads_q % heads_kv == 0 and heads_kv >= 1)"));
  }

  // An empty lse (a call without query rows) has no data to point to: torch gives it a null pointer.
  const bool lse_given = a.lse.defined() || (a.lse.ndim > 0 && a.lse.numel() == 0);
  if (lse_given || need_lse) {
    if (!lse_given) {
      return Status::Invalid("lse: required by backward (pass the lse written by forward)");
    }
    st = check_form("lse", a.lse, varlen ? 2 : 3, varlen ? "(heads, total_q)" : "(batch, heads, seqlen_q)");
    if (st.ok()) st = check_dtype("lse", a.lse, DType::F32, "lse is always fp32");
    if (st.ok()) {
      st = varlen ? check_shape("lse", a.lse, {hq, a.q.shape[0]}, "(heads_q, total_q)")
                  : check_shape("lse", a.lse, {a.q.shape[0], hq, a.q.shape[1]}, "(batch, heads_q, seqlen_q)");
    }
    if (!st.ok()) return st;
  }

  st = check_device("k", a.k, a.q);
  if (st.ok()) st = check_device("v", a.v, a.q);
  if (st.ok()) st = check_device("out", a.out, a.q);
  if (st.ok() && lse_given) st = check_device("lse", a.lse, a.q);
  return st;
}

// Sizes of the index arrays and max_seqlen (contents come later, once on the host).
Status check_index_sizes(const AttnArgs& a, bool varlen) {
  if (a.cu_seqlens_k.defined() != varlen) {
    return Status::Invalid(varlen ? "cu_seqlens_k: missing (varlen needs cu_seqlens_q and cu_seqlens_k)"
                                  : "cu_seqlens_q: missing (varlen needs cu_seqlens_q and cu_seqlens_k)");
  }
  int64_t batch = a.q.shape[0];
  if (varlen) {
    if (a.cu_seqlens_q.size < 1) {
      return Status::Invalid(msg("cu_seqlens_q: needs batch + 1 >= 1 entries but has ", a.cu_seqlens_q.size));
    }
    if (a.cu_seqlens_k.size != a.cu_seqlens_q.size) {
      return Status::Invalid(msg("cu_seqlens_k: has ", a.cu_seqlens_k.size, " entries but cu_seqlens_q has ",
                                 a.cu_seqlens_q.size, " (both hold batch + 1 offsets)"));
    }
    batch = a.cu_seqlens_q.size - 1;
    if (a.max_seqlen_q < 0 || a.max_seqlen_k < 0) {
      return Status::Invalid(msg(a.max_seqlen_q < 0 ? "max_seqlen_q" : "max_seqlen_k",
                                 ": must be >= 0 but got ", std::min(a.max_seqlen_q, a.max_seqlen_k)));
    }
  }
  if (a.seqused_q.defined() && a.seqused_q.size != batch) {
    return Status::Invalid(msg("seqused_q: has ", a.seqused_q.size, " entries but batch is ", batch));
  }
  if (a.seqused_k.defined() && a.seqused_k.size != batch) {
    return Status::Invalid(msg("seqused_k: has ", a.seqused_k.size, " entries but batch is ", batch));
  }
  return Status::Ok();
}

Status check_offsets(const char* name, const std::vector<int32_t>& cu, int64_t total,
                     const char* total_name) {
  if (cu[0] != 0) return Status::Invalid(msg(name, ": must start at 0 but starts at ", cu[0]));
  for (size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1]) {
      return Status::Invalid(msg(name, ": must be non-decreasing but entry ", i, " (", cu[i],
                                 ") < entry ", i - 1, " (", cu[i - 1], ")"));
    }
  }
  if (cu.back() != total) {
    return Status::Invalid(msg(name, ": last entry ", cu.back(), " must equal ", total_name, " ", total));
  }
  return Status::Ok();
}

// seqused entries within [0, rows of that sequence].
Status check_used(const char* name, const std::vector<int32_t>& used,
                  const std::vector<int32_t>& cu, int64_t fixed_rows) {
  for (size_t b = 0; b < used.size(); ++b) {
    const int64_t rows = cu.empty() ? fixed_rows : int64_t(cu[b + 1]) - cu[b];
    if (used[b] < 0 || used[b] > rows) {
      return Status::Invalid(msg(name, ": entry ", b, " is ", used[b], " but must be in [0, ",
                                 rows, "] (the tokens of sequence ", b, ")"));
    }
  }
  return Status::Ok();
}

// `zero_derives`: on the host backends max_seqlen 0 means "derive it from cu_seqlens"; on CUDA it
// is a bound like any other (0 = every sequence of that side is empty, as FlashAttention reads it).
Status check_max_seqlen(const char* name, int32_t max_len, const std::vector<int32_t>& cu,
                        bool zero_derives) {
  if (max_len <= 0 && zero_derives) return Status::Ok();
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    if (cu[b + 1] - cu[b] > max_len) {
      return Status::Invalid(msg(name, ": ", max_len, " is less than the length ", cu[b + 1] - cu[b],
                                 " of sequence ", b));
    }
  }
  return Status::Ok();
}

Status check_index_contents(const AttnArgs& a, bool varlen, Backend be, const HostIndexArrays& idx) {
  if (!idx.read) return Status::Ok();  // on a device with check_index_arrays off: caller vouches
  Status st;
  if (varlen) {
    const bool zero_derives = be != Backend::CUDA;
    st = check_offsets("cu_seqlens_q", idx.cu_q, a.q.shape[0], "total_q (q.shape[0])");
    if (st.ok()) st = check_offsets("cu_seqlens_k", idx.cu_k, a.k.shape[0], "total_k (k.shape[0])");
    if (st.ok()) st = check_max_seqlen("max_seqlen_q", a.max_seqlen_q, idx.cu_q, zero_derives);
    if (st.ok()) st = check_max_seqlen("max_seqlen_k", a.max_seqlen_k, idx.cu_k, zero_derives);
  }
  if (st.ok()) st = check_used("seqused_q", idx.used_q, idx.cu_q, varlen ? 0 : a.q.shape[1]);
  if (st.ok()) st = check_used("seqused_k", idx.used_k, idx.cu_k, varlen ? 0 : a.k.shape[1]);
  return st;
}

}  // namespace

Status check_backend_device(const Tensor& q, Backend be) {
  if (be == Backend::CUDA) {
#ifndef FASTATTN_WITH_CUDA
    return Status::Unsupported("backend cuda: fastattn was built without CUDA");
#endif
    if (q.device != Device::CUDA) {
      return Status::Invalid(msg("q: on ", device_string(q), " but backend cuda needs CUDA device tensors"));
    }
    return Status::Ok();
  }
  if (q.device != Device::CPU) {
    return Status::Invalid(msg("q: on ", device_string(q), " but backend ", backend_name(be),
                               " needs host tensors"));
  }
  return Status::Ok();
}

namespace {

// The chosen backend supports this problem (head dims, and for CUDA what this build holds).
// A CUDA call with no work launches no kernel, yet it must be one the kernel would take with data
// (same dtypes, head dims, alignment): the kernel's checks see it with max_seqlen bounds of 1.
Status check_backend_limits(const AttnArgs& a, Backend be, bool backward, int64_t d, int64_t dv) {
  if (be == Backend::CUDA) {
#ifdef FASTATTN_WITH_CUDA
    auto check = [backward](const AttnArgs& args) {
      return backward ? cuda_backend::check_backward(args) : cuda_backend::check_forward(args);
    };
    if (!has_work(resolve_shape(a))) {
      AttnArgs probe = a;
      probe.max_seqlen_q = std::max(probe.max_seqlen_q, 1);
      probe.max_seqlen_k = std::max(probe.max_seqlen_k, 1);
      return check(probe);
    }
    return check(a);
#else
    return Status::Unsupported("backend cuda: fastattn was built without CUDA");
#endif
  }
  if (d < 1 || d > kMaxCpuHeadDim) {
    return Status::Unsupported(msg("q: head_dim ", d, " not supported by backend ", backend_name(be),
                                   " (supported: 1..", kMaxCpuHeadDim, ")"));
  }
  if (dv < 1 || dv > kMaxCpuHeadDim) {
    return Status::Unsupported(msg("v: head_dim_v ", dv, " not supported by backend ", backend_name(be),
                                   " (supported: 1..", kMaxCpuHeadDim, ")"));
  }
  return Status::Ok();
}

Status prepare_common(const AttnArgs& a, bool backward, Prepared* out) {
  Status st = check_scalars(a);
  if (!st.ok()) return st;
  const bool varlen = a.cu_seqlens_q.defined();
  st = check_tensors(a, varlen, backward);
  if (st.ok()) st = check_index_sizes(a, varlen);
  if (!st.ok()) return st;
  out->backend = resolve_backend(a);
  const int hd = varlen ? 1 : 2;  // heads axis; head dims follow it
  st = check_backend_device(a.q, out->backend);
  if (st.ok()) st = read_index_arrays(a, &out->index);
  if (st.ok()) st = check_index_contents(a, varlen, out->backend, out->index);
  if (st.ok()) st = check_block_mask(a, varlen, out->index);
  if (st.ok()) st = check_bit_mask(a, varlen, out->index);
  if (st.ok()) st = check_bias(a, varlen, out->index);
  if (st.ok()) st = check_alibi(a, varlen);
  if (st.ok()) st = check_backend_limits(a, out->backend, backward, a.q.shape[hd + 1], a.v.shape[hd + 1]);
  if (!st.ok()) return st;
  if (out->index.read) {
    out->problem = resolve_problem(a, out->index.cu_q, out->index.cu_k, out->index.used_q,
                                   out->index.used_k);
  } else {
    out->problem = resolve_operands(a);
  }
  if (out->backend == Backend::CUDA && (out->problem.blocks.defined() || out->problem.bits.defined()))
    return cuda_block_mask_support(out->problem, backward, backward && a.deterministic);
  return Status::Ok();
}

}  // namespace

Backend resolve_backend(const AttnArgs& args) {
  if (args.backend != Backend::Auto) return args.backend;
  return args.q.device == Device::CUDA ? Backend::CUDA : Backend::CPU;
}

Status prepare_forward(const AttnArgs& args, Prepared* out) {
  return prepare_common(args, /*backward=*/false, out);
}

Status prepare_backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv, Prepared* out) {
  Status st = prepare_common(args, /*backward=*/true, out);
  if (!st.ok()) return st;
  const bool varlen = args.cu_seqlens_q.defined();
  const int32_t nd = varlen ? 3 : 4;
  struct Grad {
    const char* name;
    const Tensor& t;
    const Tensor& like;
    const char* like_name;
  };
  const Grad grads[] = {{"dout", dout, args.out, "out"},
                        {"dq", dq, args.q, "q"},
                        {"dk", dk, args.k, "k"},
                        {"dv", dv, args.v, "v"}};
  for (const Grad& g : grads) {
    st = check_form(g.name, g.t, nd, varlen ? "(tokens, heads, head_dim)" : "(batch, seqlen, heads, head_dim)");
    if (st.ok()) st = check_dtype(g.name, g.t, args.q.dtype, "gradients have q's dtype");
    if (st.ok()) {
      bool same = true;
      for (int32_t i = 0; i < nd; ++i) same = same && g.t.shape[i] == g.like.shape[i];
      if (!same) {
        st = Status::Invalid(msg(g.name, ": shape ", shape_string(g.t), " must equal ", g.like_name,
                                 "'s shape ", shape_string(g.like)));
      }
    }
    if (st.ok()) st = check_device(g.name, g.t, args.q);
    if (!st.ok()) return st;
  }
  st = check_dbias(args);
  if (!st.ok()) return st;
#ifdef FASTATTN_WITH_CUDA
  if (out->backend == Backend::CUDA) {
    st = cuda_backend::check_backward_grads(dout, dq, dk, dv);
    if (!st.ok()) return st;
  }
#endif
  out->grads.dout = make_operand(dout, varlen);
  out->grads.dq = make_operand(dq, varlen);
  out->grads.dk = make_operand(dk, varlen);
  out->grads.dv = make_operand(dv, varlen);
  if (args.dbias.defined()) out->grads.dbias = resolve_bias(args.dbias, out->problem.heads_q);
  return Status::Ok();
}

}  // namespace fastattn::detail

namespace fastattn {

Status validate_forward(const AttnArgs& args) {
  detail::Prepared p;
  return detail::prepare_forward(args, &p);
}

Status validate_backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq,
                         const Tensor& dk, const Tensor& dv) {
  detail::Prepared p;
  return detail::prepare_backward(args, dout, dq, dk, dv, &p);
}

}  // namespace fastattn
