// Device buffers for GPU tests: RAII allocation, host <-> device copies, NaN poisoning; the Hopper fixture.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
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

// One library call captured in a CUDA graph on a stream of its own and replayed on demand; the graph
// and the stream are freed at scope exit (also when an assertion returns early).
class CapturedCall {
 public:
  CapturedCall() = default;
  ~CapturedCall() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  // Captures call(stream) (it returns a Status); "" on success, else what failed: the call's own
  // message first, since a failed call also breaks the capture.
  template <class Call>
  std::string capture(Call&& call) {
    cudaError_t e = cudaStreamCreate(&stream_);
    if (e == cudaSuccess) e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) return std::string("capture start: ") + cudaGetErrorString(e);
    const auto st = call(stream_);
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(stream_, &g);
    if (!st.ok()) {
      if (g) cudaGraphDestroy(g);
      return "captured call: " + st.message;
    }
    if (e != cudaSuccess) return std::string("capture end: ") + cudaGetErrorString(e);
    e = cudaGraphInstantiate(&exec_, g, 0);
    cudaGraphDestroy(g);
    return e == cudaSuccess ? "" : std::string("graph instantiate: ") + cudaGetErrorString(e);
  }
  // One replay, finished.
  cudaError_t replay() const {
    const cudaError_t e = cudaGraphLaunch(exec_, stream_);
    return e != cudaSuccess ? e : cudaStreamSynchronize(stream_);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
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
