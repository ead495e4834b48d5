// Plain-value views -> fastattn types. Every rejection names the argument and what it got.
#include "views.h"

#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "convert.h"

namespace fastattn_py {
namespace {

constexpr int kInt32 = 3;  // dtype code of index arrays; 0..2 are fastattn::DType
constexpr int kByte = 4;   // bool or uint8: block masks

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

std::string text_of(PyObject* o) {
  nb::str s = nb::str(nb::handle(o));
  return s.c_str();
}

int64_t as_int64(PyObject* o) {
  const long long x = PyLong_AsLongLong(o);
  if (x == -1 && PyErr_Occurred()) throw nb::python_error();
  return x;
}

// The parts of one view, checked for form only.
struct Parts {
  void* data;
  PyObject* shape;
  PyObject* strides;
  PyObject* dtype;
  PyObject* device;
};

Parts parts_of(nb::handle view, const char* name) {
  PyObject* v = view.ptr();
  if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) < 5)
    raise(PyExc_TypeError, std::string(name) + ": expected a view (data_ptr, shape, strides, dtype, device)");
  Parts p{nullptr, PyTuple_GET_ITEM(v, 1), PyTuple_GET_ITEM(v, 2), PyTuple_GET_ITEM(v, 3),
          PyTuple_GET_ITEM(v, 4)};
  p.data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(v, 0));
  if (p.data == nullptr && PyErr_Occurred()) throw nb::python_error();
  if (!PyTuple_Check(p.shape) || !PyTuple_Check(p.strides) ||
      PyTuple_GET_SIZE(p.shape) != PyTuple_GET_SIZE(p.strides))
    raise(PyExc_TypeError, std::string(name) + ": a view's shape and strides must be tuples of one length");
  return p;
}

int dtype_code(PyObject* dtype) {
  if (!PyLong_Check(dtype)) return -1;
  const int64_t c = as_int64(dtype);
  return c >= 0 && c <= kByte ? static_cast<int>(c) : -1;
}

const char* code_name(int code) {
  static const char* names[] = {"float16", "bfloat16", "float32", "int32", "bool/uint8"};
  return names[code];
}

std::string dtype_text(PyObject* dtype) {
  const int code = dtype_code(dtype);
  return code >= 0 ? code_name(code) : text_of(dtype);
}

// (device, index) of a view; ValueError naming `name` unless the CPU or a CUDA device.
std::pair<fastattn::Device, int32_t> device_of(PyObject* device, const char* name) {
  if (PyLong_Check(device)) {
    const int64_t d = as_int64(device);
    if (d == -1) return {fastattn::Device::CPU, 0};
    if (d >= 0 && d <= INT32_MAX) return {fastattn::Device::CUDA, static_cast<int32_t>(d)};
  }
  raise(PyExc_ValueError, std::string(name) + ": device " + text_of(device) +
                              " is not supported (CPU or CUDA)");
}

}  // namespace

fastattn::Tensor view_to_tensor(nb::handle view, const char* name) {
  const Parts p = parts_of(view, name);
  const Py_ssize_t ndim = PyTuple_GET_SIZE(p.shape);
  if (ndim < 1 || ndim > 4)
    raise(PyExc_ValueError, std::string(name) + ": expected 1 to 4 dimensions, got " + std::to_string(ndim));
  const int code = dtype_code(p.dtype);
  if (code < 0 || code >= kInt32)
    raise(PyExc_ValueError, std::string(name) + ": dtype " + dtype_text(p.dtype) +
                                " is not supported (float16, bfloat16 or float32)");
  fastattn::Tensor t;
  t.data = p.data;
  t.ndim = static_cast<int32_t>(ndim);
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    t.shape[i] = as_int64(PyTuple_GET_ITEM(p.shape, i));
    t.stride[i] = as_int64(PyTuple_GET_ITEM(p.strides, i));
  }
  t.dtype = static_cast<fastattn::DType>(code);
  std::tie(t.device, t.device_index) = device_of(p.device, name);
  return t;
}

fastattn::IndexArray view_to_index(nb::handle view, const char* name, const fastattn::Tensor& where) {
  const Parts p = parts_of(view, name);
  if (dtype_code(p.dtype) != kInt32)
    raise(PyExc_ValueError, std::string(name) + ": expected dtype int32, got " + dtype_text(p.dtype));
  const Py_ssize_t ndim = PyTuple_GET_SIZE(p.shape);
  if (ndim != 1)
    raise(PyExc_ValueError, std::string(name) + ": expected 1 dimension, got " + std::to_string(ndim));
  const int64_t size = as_int64(PyTuple_GET_ITEM(p.shape, 0));
  const int64_t stride = as_int64(PyTuple_GET_ITEM(p.strides, 0));
  if (size > 1 && stride != 1)
    raise(PyExc_ValueError, std::string(name) + ": must be contiguous (stride " + std::to_string(stride) + ")");
  const auto [dev, index] = device_of(p.device, name);
  if (dev != where.device || (dev == fastattn::Device::CUDA && index != where.device_index))
    raise(PyExc_ValueError, std::string(name) + ": must live on the same device as q");
  fastattn::IndexArray idx;
  idx.data = given_int32_data(p.data);
  idx.size = size;
  return idx;
}

fastattn::BlockMask view_to_block_mask(nb::handle view, const char* name, int32_t block_q, int32_t block_k) {
  const Parts p = parts_of(view, name);
  if (dtype_code(p.dtype) != kByte)
    raise(PyExc_ValueError, std::string(name) + ": expected dtype bool or uint8, got " + dtype_text(p.dtype));
  const Py_ssize_t ndim = PyTuple_GET_SIZE(p.shape);
  if (ndim != 4)
    raise(PyExc_ValueError, std::string(name) + ": expected 4 dimensions (mask_batch, mask_heads, q_blocks, "
                                "k_blocks), got " + std::to_string(ndim));
  fastattn::BlockMask m;
  m.data = static_cast<const uint8_t*>(p.data);
  for (Py_ssize_t i = 0; i < 4; ++i) {
    m.shape[i] = as_int64(PyTuple_GET_ITEM(p.shape, i));
    m.stride[i] = as_int64(PyTuple_GET_ITEM(p.strides, i));
  }
  std::tie(m.device, m.device_index) = device_of(p.device, name);
  m.block_q = block_q;
  m.block_k = block_k;
  return m;
}

fastattn::BitMask view_to_bit_mask(nb::handle view, const char* name) {
  const Parts p = parts_of(view, name);
  if (dtype_code(p.dtype) != kInt32)
    raise(PyExc_ValueError, std::string(name) + ": packed words must be int32, got " + dtype_text(p.dtype));
  const Py_ssize_t ndim = PyTuple_GET_SIZE(p.shape);
  if (ndim != 4)
    raise(PyExc_ValueError, std::string(name) + ": packed words need 4 dimensions (mask_batch, mask_heads, rows, "
                                "words), got " + std::to_string(ndim));
  fastattn::BitMask m;
  m.data = static_cast<const uint32_t*>(p.data);
  int64_t stride[4];
  for (Py_ssize_t i = 0; i < 4; ++i) {
    m.shape[i] = as_int64(PyTuple_GET_ITEM(p.shape, i));
    stride[i] = as_int64(PyTuple_GET_ITEM(p.strides, i));
  }
  if (stride[3] != 1 && m.shape[3] > 1)
    raise(PyExc_ValueError, std::string(name) + ": the word dim must be contiguous (stride 1), got stride " +
                                std::to_string(stride[3]));
  for (int i = 0; i < 3; ++i) m.stride[i] = m.shape[i] == 1 ? 0 : stride[i];  // as the DLPack path (to_bit_mask)
  std::tie(m.device, m.device_index) = device_of(p.device, name);
  return m;
}

fastattn::PageTable view_to_page_table(nb::handle view, const char* name, const fastattn::Tensor& where) {
  const Parts p = parts_of(view, name);
  const Py_ssize_t ndim = PyTuple_GET_SIZE(p.shape);
  if (dtype_code(p.dtype) != kInt32 || ndim != 2)
    raise(PyExc_ValueError, std::string(name) + ": expected a 2-D int32 array (batch, pages_per_seq), got " +
                                std::to_string(ndim) + "-D " + dtype_text(p.dtype));
  const int64_t batch = as_int64(PyTuple_GET_ITEM(p.shape, 0));
  const int64_t pages = as_int64(PyTuple_GET_ITEM(p.shape, 1));
  if (pages > 1 && as_int64(PyTuple_GET_ITEM(p.strides, 1)) != 1)
    raise(PyExc_ValueError, std::string(name) + ": rows must be contiguous");
  if (batch > 1 && as_int64(PyTuple_GET_ITEM(p.strides, 0)) != pages)
    raise(PyExc_ValueError, std::string(name) + ": must be C-contiguous (batch, pages_per_seq)");
  const auto [dev, index] = device_of(p.device, name);
  if (dev != where.device || (dev == fastattn::Device::CUDA && index != where.device_index))
    raise(PyExc_ValueError, std::string(name) + ": must live on the same device as q");
  return {given_int32_data(p.data), batch, pages};
}

}  // namespace fastattn_py
