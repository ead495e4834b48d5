#include "api/tensor_checks.h"

#include <cstdint>

#include "api/message.h"

namespace fastattn::detail {

Status check_form(const char* name, const Tensor& t, int32_t ndim, const char* dims) {
  if (t.ndim != ndim) {
    return Status::Invalid(msg(name, ": expected ", ndim, " dims ", dims, " but got ", t.ndim));
  }
  const int32_t dt = static_cast<int32_t>(t.dtype);
  if (dt < 0 || dt > 2) {
    return Status::Invalid(msg(name, ": unknown dtype code ", dt, " (expected fp16, bf16 or fp32)"));
  }
  const int32_t dev = static_cast<int32_t>(t.device);
  if (dev < 0 || dev > 1) {
    return Status::Invalid(msg(name, ": unknown device code ", dev, " (expected cpu or cuda)"));
  }
  for (int32_t i = 0; i < ndim; ++i) {
    if (t.shape[i] < 0) {
      return Status::Invalid(msg(name, ": dim ", i, " has negative size ", t.shape[i]));
    }
    // Sequence lengths, positions and row counts are 32-bit everywhere (cu_seqlens, seqused, page ids).
    if (t.shape[i] > INT32_MAX) {
      return Status::Invalid(msg(name, ": dim ", i, " has size ", t.shape[i], " but sizes are limited to 2^31 - 1 = ",
                                 INT32_MAX));
    }
  }
  if (t.data == nullptr && t.numel() > 0) {
    return Status::Invalid(msg(name, ": data pointer is null but the tensor has ", t.numel(),
                               " elements"));
  }
  // An empty tensor has no layout to speak of (DLPack producers give it any strides).
  if (t.stride[ndim - 1] != 1 && t.numel() > 0) {
    return Status::Invalid(msg(name, ": last dim must have unit stride but has stride ",
                               t.stride[ndim - 1]));
  }
  return Status::Ok();
}

Status check_dtype(const char* name, const Tensor& t, DType want, const char* rule) {
  if (t.dtype == want) return Status::Ok();
  return Status::Invalid(msg(name, ": dtype ", dtype_name(t.dtype), " but expected ",
                             dtype_name(want), " (", rule, ")"));
}

Status check_shape(const char* name, const Tensor& t, std::initializer_list<int64_t> want,
                   const char* dims) {
  bool same = t.ndim == int32_t(want.size());
  int32_t i = 0;
  for (int64_t w : want) {
    if (same && t.shape[i] != w) same = false;
    ++i;
  }
  if (same) return Status::Ok();
  Tensor expected;
  expected.ndim = int32_t(want.size());
  i = 0;
  for (int64_t w : want) expected.shape[i++] = w;
  return Status::Invalid(msg(name, ": expected shape ", dims, " = ", shape_string(expected),
                             " but got ", shape_string(t)));
}

Status check_device(const char* name, const Tensor& t, const Tensor& q) {
  if (t.device == q.device && (t.device == Device::CPU || t.device_index == q.device_index)) {
    return Status::Ok();
  }
  return Status::Invalid(msg(name, ": on ", device_string(t), " but q is on ", device_string(q),
                             " (all tensors must be on one device)"));
}

}  // namespace fastattn::detail
