// Tensor basics of the public API: dtype names and sizes, element counts, contiguous views.
#include "fastattn/types.h"

namespace fastattn {

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::F32: return "fp32";
  }
  return "unknown";
}

int dtype_size(DType dt) {
  switch (dt) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device,
                   int32_t device_index) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_index = device_index;
  t.ndim = int32_t(shape.size() > 4 ? 4 : shape.size());
  int i = 0;
  for (int64_t s : shape) {
    if (i == 4) break;
    t.shape[i++] = s;
  }
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

}  // namespace fastattn
