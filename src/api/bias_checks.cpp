// The bias rules, in the order a user most likely needs to hear about them. The host backends read
// the bias element by element, so its strides are free there (0 broadcasts); the CUDA backend's
// extra layout rules live with its kernels (cuda_backend::check_forward).
#include "api/bias_checks.h"

#include <algorithm>
#include <cstdlib>

#include "api/block_mask_checks.h"
#include "api/message.h"
#include "api/tensor_checks.h"

namespace fastattn::detail {
namespace {

constexpr const char* kDims = "(bias_batch, bias_heads, rows, cols)";

// Rank 4, known dtype / device, unit last stride (check_form), sizes in 1..2^31-1, q's device.
Status check_bias_form(const char* name, const Tensor& t, const Tensor& q) {
  Status st = check_form(name, t, 4, kDims);
  if (!st.ok()) return st;
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] < 1 || t.shape[i] > INT32_MAX) {
      return Status::Invalid(msg(name, ": dim ", i, " has size ", t.shape[i], " but every dim of ", kDims,
                                 " needs 1..2^31-1"));
    }
  }
  return check_device(name, t, q);
}

// The dim of a 4-D tensor whose entries reach back into the dims of smaller stride (two entries at one
// address), or -1 when every entry has its own: taken by |stride| (dims of size 1 skipped), each dim must
// start past the reach of the ones inside it. Sufficient, not necessary: dense, padded, permuted and
// reversed layouts pass; only interleaved ones that happen not to collide are refused with the overlaps.
int overlapping_dim(const Tensor& t) {
  int order[4] = {0, 1, 2, 3};
  std::sort(order, order + 4, [&](int x, int y) { return std::llabs(t.stride[x]) < std::llabs(t.stride[y]); });
  int64_t reach = 0;  // the largest offset the dims taken so far span
  for (int i : order) {
    if (t.shape[i] < 2) continue;
    const int64_t step = std::llabs(t.stride[i]);
    if (step <= reach) return i;
    reach += step * (t.shape[i] - 1);
  }
  return -1;
}

}  // namespace

Status check_bias(const AttnArgs& a, bool varlen, const HostIndexArrays& idx) {
  const Tensor& t = a.bias;
  if (!t.defined()) {
    if (a.dbias.defined()) {
      return Status::Invalid("dbias: given without bias (dbias is the gradient of AttnArgs::bias; pass the bias too)");
    }
    return Status::Ok();
  }
  Status st = check_bias_form("bias", t, a.q);
  if (!st.ok()) return st;
  const int hd = varlen ? 1 : 2;
  const int64_t batch = varlen ? a.cu_seqlens_q.size - 1 : a.q.shape[0];
  const int64_t hq = a.q.shape[hd], hkv = a.k.shape[hd];
  if (t.shape[0] != 1 && t.shape[0] != batch) {
    return Status::Invalid(msg("bias: dim 0 (bias_batch) is ", t.shape[0], " but must be 1 (shared) or batch ", batch));
  }
  if (hq % t.shape[1] != 0) {
    return Status::Invalid(msg("bias: dim 1 (bias_heads) is ", t.shape[1], " but must divide heads_q ", hq,
                               " (1, heads_kv ", hkv, " or heads_q are the usual choices)"));
  }
  const int64_t rows_q = longest(varlen, varlen ? 0 : a.q.shape[1], a.max_seqlen_q, idx.cu_q);
  const int64_t rows_k = longest(varlen, varlen ? 0 : a.k.shape[1], a.max_seqlen_k, idx.cu_k);
  if (t.shape[2] < rows_q) {
    return Status::Invalid(msg("bias: dim 2 (rows) is ", t.shape[2], " but must be >= ",
                               varlen ? "max_seqlen_q " : "seqlen_q ", rows_q, " (the rows cover the longest sequence)"));
  }
  if (t.shape[3] < rows_k) {
    return Status::Invalid(msg("bias: dim 3 (cols) is ", t.shape[3], " but must be >= ",
                               varlen ? "max_seqlen_k " : "seqlen_k ", rows_k, " (the cols cover the longest sequence)"));
  }
  return Status::Ok();
}

Status check_alibi(const AttnArgs& a, bool varlen) {
  const Tensor& t = a.alibi_slopes;
  if (!t.defined()) return Status::Ok();
  const int hd = varlen ? 1 : 2;
  const int64_t batch = varlen ? a.cu_seqlens_q.size - 1 : a.q.shape[0];
  const int64_t hq = a.q.shape[hd];
  if (t.ndim != 1 && t.ndim != 2) {
    return Status::Invalid(msg("alibi_slopes: expected 1 dim (heads_q) or 2 dims (batch, heads_q) but got ", t.ndim));
  }
  Status st = check_form("alibi_slopes", t, t.ndim, t.ndim == 1 ? "(heads_q)" : "(batch, heads_q)");
  if (st.ok()) st = check_dtype("alibi_slopes", t, DType::F32, "the slopes are fp32, as in FlashAttention");
  if (!st.ok()) return st;
  if (t.shape[t.ndim - 1] != hq) {
    return Status::Invalid(msg("alibi_slopes: shape ", shape_string(t), " but its last dim must be heads_q ", hq,
                               " (one slope per query head)"));
  }
  if (t.ndim == 2 && t.shape[0] != batch) {
    return Status::Invalid(msg("alibi_slopes: shape ", shape_string(t), " but its first dim must be batch ", batch,
                               " (or pass a 1-D (heads_q) tensor shared by the batch)"));
  }
  return check_device("alibi_slopes", t, a.q);
}

Status check_dbias(const AttnArgs& a) {
  const Tensor& t = a.dbias;
  if (!t.defined()) return Status::Ok();
  Status st = check_bias_form("dbias", t, a.q);
  if (!st.ok()) return st;
  if (t.dtype != DType::F32) {
    return Status::Unsupported(msg("dbias: dtype ", dtype_name(t.dtype),
                                   " is not supported (dbias is accumulated and written in fp32; pass an F32 tensor)"));
  }
  for (int i = 0; i < 4; ++i) {
    if (t.shape[i] != a.bias.shape[i]) {
      return Status::Invalid(msg("dbias: shape ", shape_string(t), " must equal bias's shape ", shape_string(a.bias),
                                 " (the gradient of every bias entry, broadcast dims summed)"));
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (t.shape[i] > 1 && t.stride[i] == 0) {
      return Status::Invalid(msg("dbias: dim ", i, " has stride 0 (a broadcast view) but dbias is written: each entry "
                                 "needs its own address"));
    }
  }
  if (const int i = overlapping_dim(t); i >= 0) {  // e.g. rows 1 element apart: the adds of two entries would mix
    return Status::Invalid(msg("dbias: dim ", i, " has stride ", t.stride[i], " which lands inside the dims of "
                               "smaller stride (shape ", shape_string(t), "): two entries at one address, but dbias is "
                               "written; pass a dense or padded dbias"));
  }
  return Status::Ok();
}

}  // namespace fastattn::detail
