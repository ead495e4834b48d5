// Device buffers for GPU tests: RAII allocation, host <-> device copies, NaN poisoning; the Hopper fixture.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace fastattn::gputest {

#define FA_CUDA_OK(expr)                                                            \
  do {                                                                              \
    cudaError_t e_ = (expr);                                                        \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);          \
  } while (0)

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0 && cudaMalloc(&ptr_, bytes_) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host) const { cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice); }
  void download(void* host) const { cudaMemcpy(host, ptr_, bytes_, cudaMemcpyDeviceToHost); }
  // All bits set: NaN in fp16, bf16 and fp32, so an unwritten element can never pass a check.
  void poison() const { cudaMemset(ptr_, 0xFF, bytes_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

inline bool gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Fixture of the sm_90a tests: they fail, not skip, without a Hopper GPU (they are registered only
// on GPU machines, where a skip would hide a wrong device).
class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_FAIL() << "no GPU: these tests are registered only on GPU machines";
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (major != 9) GTEST_FAIL() << "these tests need a Hopper GPU (sm_90a)";
  }
};

}  // namespace fastattn::gputest
