// DLPack -> fastattn conversions. Every rejection names the argument and what it got.
#include "convert.h"

#include <string>

namespace fastattn_py {
namespace {

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

std::string dtype_text(nb::dlpack::dtype dt) {
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(dt.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return std::string(kind) + std::to_string(dt.bits);
}

fastattn::DType to_dtype(nb::dlpack::dtype dt, const char* name) {
  if (dt.lanes == 1) {
    if (dt.code == (uint8_t)nb::dlpack::dtype_code::Float && dt.bits == 16) return fastattn::DType::F16;
    if (dt.code == (uint8_t)nb::dlpack::dtype_code::Float && dt.bits == 32) return fastattn::DType::F32;
    if (dt.code == (uint8_t)nb::dlpack::dtype_code::Bfloat && dt.bits == 16) return fastattn::DType::BF16;
  }
  raise(PyExc_ValueError, std::string(name) + ": dtype " + dtype_text(dt) +
                              " is not supported (float16, bfloat16 or float32)");
}

fastattn::Device to_device(int type, const char* name) {
  if (type == nb::device::cpu::value || type == nb::device::cuda_host::value) return fastattn::Device::CPU;
  if (type == nb::device::cuda::value || type == nb::device::cuda_managed::value) return fastattn::Device::CUDA;
  raise(PyExc_ValueError, std::string(name) + ": DLPack device type " + std::to_string(type) +
                              " is not supported (CPU or CUDA)");
}

template <typename Array>
fastattn::Tensor convert(const Array& a, const char* name) {
  if (a.ndim() < 1 || a.ndim() > 4)
    raise(PyExc_ValueError, std::string(name) + ": expected 1 to 4 dimensions, got " +
                                std::to_string(a.ndim()));
  fastattn::Tensor t;
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.ndim = static_cast<int32_t>(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    t.shape[i] = static_cast<int64_t>(a.shape(i));
    t.stride[i] = a.stride(i);
  }
  t.dtype = to_dtype(a.dtype(), name);
  t.device = to_device(a.device_type(), name);
  t.device_index = a.device_id();
  return t;
}

}  // namespace

fastattn::Tensor to_tensor(const InArray& a, const char* name) { return convert(a, name); }
fastattn::Tensor to_tensor(const OutArray& a, const char* name) { return convert(a, name); }

const int32_t* given_int32_data(const void* data) {
  static const int32_t kNoElements = 0;
  return data != nullptr ? static_cast<const int32_t*>(data) : &kNoElements;
}

fastattn::IndexArray to_index(const InArray& a, const char* name, const fastattn::Tensor& where) {
  nb::dlpack::dtype dt = a.dtype();
  if (dt.code != (uint8_t)nb::dlpack::dtype_code::Int || dt.bits != 32 || dt.lanes != 1)
    raise(PyExc_ValueError, std::string(name) + ": expected dtype int32, got " + dtype_text(dt));
  if (a.ndim() != 1)
    raise(PyExc_ValueError, std::string(name) + ": expected 1 dimension, got " + std::to_string(a.ndim()));
  if (a.shape(0) > 1 && a.stride(0) != 1)
    raise(PyExc_ValueError, std::string(name) + ": must be contiguous (stride " +
                                std::to_string(a.stride(0)) + ")");
  fastattn::Device dev = to_device(a.device_type(), name);
  if (dev != where.device || (dev == fastattn::Device::CUDA && a.device_id() != where.device_index))
    raise(PyExc_ValueError, std::string(name) + ": must live on the same device as q");
  fastattn::IndexArray idx;
  idx.data = given_int32_data(a.data());
  idx.size = static_cast<int64_t>(a.shape(0));
  return idx;
}

fastattn::BlockMask to_block_mask(const InArray& a, const char* name, int32_t block_q, int32_t block_k) {
  const nb::dlpack::dtype dt = a.dtype();
  const bool byte = dt.bits == 8 && dt.lanes == 1 &&
                    (dt.code == (uint8_t)nb::dlpack::dtype_code::Bool || dt.code == (uint8_t)nb::dlpack::dtype_code::UInt);
  if (!byte) raise(PyExc_ValueError, std::string(name) + ": expected dtype bool or uint8, got " + dtype_text(dt));
  if (a.ndim() != 4)
    raise(PyExc_ValueError, std::string(name) + ": expected 4 dimensions (mask_batch, mask_heads, q_blocks, "
                                "k_blocks), got " + std::to_string(a.ndim()));
  fastattn::BlockMask m;
  m.data = static_cast<const uint8_t*>(a.data());
  for (int i = 0; i < 4; ++i) {
    m.shape[i] = static_cast<int64_t>(a.shape(size_t(i)));
    m.stride[i] = a.stride(size_t(i));
  }
  m.device = to_device(a.device_type(), name);
  m.device_index = a.device_id();
  m.block_q = block_q;
  m.block_k = block_k;
  return m;
}

fastattn::BitMask to_bit_mask(const InArray& a, const char* name) {
  const nb::dlpack::dtype dt = a.dtype();
  const bool word = dt.bits == 32 && dt.lanes == 1 &&
                    (dt.code == (uint8_t)nb::dlpack::dtype_code::UInt || dt.code == (uint8_t)nb::dlpack::dtype_code::Int);
  if (!word) raise(PyExc_ValueError, std::string(name) + ": packed words must be uint32 or int32, got " + dtype_text(dt));
  if (a.ndim() != 4)
    raise(PyExc_ValueError, std::string(name) + ": packed words need 4 dimensions (mask_batch, mask_heads, rows, "
                                "words), got " + std::to_string(a.ndim()));
  if (a.stride(3) != 1 && a.shape(3) > 1)
    raise(PyExc_ValueError, std::string(name) + ": the word dim must be contiguous (stride 1), got stride " +
                                std::to_string(a.stride(3)));
  fastattn::BitMask m;
  m.data = static_cast<const uint32_t*>(a.data());
  for (int i = 0; i < 4; ++i) m.shape[i] = static_cast<int64_t>(a.shape(size_t(i)));
  for (int i = 0; i < 3; ++i) m.stride[i] = a.shape(size_t(i)) == 1 ? 0 : a.stride(size_t(i));
  m.device = to_device(a.device_type(), name);
  m.device_index = a.device_id();
  return m;
}

void raise_if_error(const fastattn::Status& st) {
  switch (st.code) {
    case fastattn::Code::Ok: return;
    case fastattn::Code::InvalidArgument: raise(PyExc_ValueError, st.message);
    case fastattn::Code::NotSupported: raise(PyExc_NotImplementedError, st.message);
    case fastattn::Code::CudaError: raise(PyExc_RuntimeError, "CUDA error: " + st.message);
    default: raise(PyExc_RuntimeError, st.message);
  }
}

}  // namespace fastattn_py
