// Memory and timing on the run device. CUDA pieces compile only with FASTATTN_WITH_CUDA, so a
// CPU-only build has no CUDA dependency.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "fastattn/types.h"

namespace fastattn::cli {

// A byte buffer on `device`; host buffers are plain vectors.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const std::vector<std::byte>& host);
  std::vector<std::byte> download() const;
  void fill_nan(DType dt);  // poison, so unwritten outputs show up as NaN

 private:
  Device device_ = Device::CPU;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::vector<std::byte> host_;
};

// Wall time of `fn` in milliseconds, measured with events on the default stream on CUDA.
// Throws std::runtime_error when fn fails, carrying its message.
double time_ms(Device device, const std::function<Status()>& fn);

// Whether this build has the CUDA runtime (FASTATTN_WITH_CUDA).
bool cuda_compiled_in();

// One line per CUDA device ("0: NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB"), or a reason.
std::vector<std::string> describe_cuda_devices();
std::string device_name(Device device);

}  // namespace fastattn::cli
