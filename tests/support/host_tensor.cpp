#include "support/host_tensor.h"

#include <cmath>
#include <cstring>

#include "util/half.h"

namespace fastattn::testing {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad) {
  view_.ndim = int32_t(shape.size());
  view_.dtype = dtype;
  int64_t stride = 1;
  for (int d = view_.ndim - 1; d >= 0; --d) {
    view_.shape[d] = shape[size_t(d)];
    view_.stride[d] = stride;
    stride *= shape[size_t(d)] + (d == view_.ndim - 1 ? pad : 0);
  }
  // At least one element so data() is never null, even for empty tensors.
  storage_.assign(size_t(std::max<int64_t>(stride, 1) * dtype_size(dtype)), kPoisonByte);
  view_.data = storage_.data();
}

HostTensor::HostTensor(const HostTensor& other) : storage_(other.storage_), view_(other.view_) {
  view_.data = storage_.data();
}

HostTensor& HostTensor::operator=(const HostTensor& other) {
  storage_ = other.storage_;
  view_ = other.view_;
  view_.data = storage_.data();
  return *this;
}

int64_t HostTensor::offset_of(int64_t flat) const {
  int64_t off = 0;
  for (int d = view_.ndim - 1; d >= 0; --d) {
    off += (flat % view_.shape[d]) * view_.stride[d];
    flat /= view_.shape[d];
  }
  return off;
}

double HostTensor::get(int64_t flat) const {
  return util::load_as_float(storage_.data() + offset_of(flat) * dtype_size(view_.dtype), view_.dtype);
}

void HostTensor::set(int64_t flat, double value) {
  util::store_from_float(storage_.data() + offset_of(flat) * dtype_size(view_.dtype), view_.dtype,
                        float(value));
}

void HostTensor::fill_uniform(Rng& rng, float lo, float hi) {
  poison();
  for (int64_t i = 0; i < numel(); ++i) set(i, rng.uniform(lo, hi));
}

void HostTensor::fill(float value) {
  for (int64_t i = 0; i < numel(); ++i) set(i, value);
}

void HostTensor::poison() { std::memset(storage_.data(), kPoisonByte, storage_.size()); }

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[size_t(i)] = get(i);
  return out;
}

void HostTensor::from_f64(const std::vector<double>& values) {
  for (int64_t i = 0; i < numel(); ++i) set(i, values[size_t(i)]);
}

int64_t HostTensor::count_nan() const {
  int64_t n = 0;
  for (int64_t i = 0; i < numel(); ++i) n += std::isnan(get(i)) ? 1 : 0;
  return n;
}

bool HostTensor::padding_poisoned() const {
  // Mark every logical element, then every unmarked storage element must still be poison.
  const int esize = dtype_size(view_.dtype);
  std::vector<char> logical(storage_.size() / size_t(esize), 0);
  for (int64_t i = 0; i < numel(); ++i) logical[size_t(offset_of(i))] = 1;
  for (size_t e = 0; e < logical.size(); ++e) {
    if (logical[e]) continue;
    for (int b = 0; b < esize; ++b) {
      if (storage_[e * size_t(esize) + size_t(b)] != kPoisonByte) return false;
    }
  }
  return true;
}

}  // namespace fastattn::testing
