// Host tensors for tests: owned storage behind a fastattn::Tensor view, optional row padding
// (so token strides are not contiguous), NaN poisoning, and reads back as float64.
#pragma once

#include <cstdint>
#include <vector>

#include "fastattn/types.h"
#include "support/test_rng.h"

namespace fastattn::testing {

// Byte that poisons a buffer: 0xFF.. is a NaN in fp16, bf16 and fp32 alike (GPU tests can
// cudaMemset with it).
constexpr unsigned char kPoisonByte = 0xFF;

class HostTensor {
 public:
  HostTensor() = default;
  // Row-major shape; `pad` extra elements after every last-dim row make stride[ndim-2] larger
  // than the row (the last dim keeps unit stride).
  HostTensor(DType dtype, std::vector<int64_t> shape, int64_t pad = 0);
  // Copies own their storage (the view points at the copy); moves keep the buffer.
  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;

  const Tensor& view() const { return view_; }
  int64_t numel() const { return view_.numel(); }
  DType dtype() const { return view_.dtype; }

  // Uniform values in [lo, hi), rounded to the dtype; padding is poisoned.
  void fill_uniform(Rng& rng, float lo, float hi);
  void fill(float value);
  void poison();

  // Logical elements in row-major order as float64 (exact for every dtype).
  std::vector<double> to_f64() const;
  void from_f64(const std::vector<double>& values);  // rounds to the dtype
  double get(int64_t flat) const;                    // logical row-major index
  void set(int64_t flat, double value);

  // Elements still NaN (not written), and whether the padding between rows is untouched.
  int64_t count_nan() const;
  bool padding_poisoned() const;

 private:
  int64_t offset_of(int64_t flat) const;  // element offset of a logical row-major index

  std::vector<unsigned char> storage_;
  Tensor view_;
};

}  // namespace fastattn::testing
