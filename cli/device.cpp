#include "device.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "util/half.h"

#ifdef FASTATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace fastattn::cli {

#ifdef FASTATTN_WITH_CUDA
namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace
#endif

DeviceBuffer::DeviceBuffer(Device device, size_t bytes) : device_(device), bytes_(bytes) {
  if (device == Device::CPU) {
    host_.resize(bytes);
    ptr_ = host_.data();
    return;
  }
#ifdef FASTATTN_WITH_CUDA
  cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
#else
  throw std::runtime_error("this build has no CUDA support");
#endif
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(device_, other.device_);
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  std::swap(host_, other.host_);  // vector swap keeps data pointers valid
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
#ifdef FASTATTN_WITH_CUDA
  if (device_ == Device::CUDA && ptr_) cudaFree(ptr_);
#endif
}

void DeviceBuffer::upload(const std::vector<std::byte>& host) {
  if (host.size() != bytes_) throw std::logic_error("DeviceBuffer::upload: size mismatch");
  if (device_ == Device::CPU) {
    std::memcpy(ptr_, host.data(), bytes_);
    return;
  }
#ifdef FASTATTN_WITH_CUDA
  cuda_check(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#endif
}

std::vector<std::byte> DeviceBuffer::download() const {
  if (device_ == Device::CPU) return host_;
  std::vector<std::byte> host(bytes_);
#ifdef FASTATTN_WITH_CUDA
  cuda_check(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#endif
  return host;
}

void DeviceBuffer::fill_nan(DType dt) {
  const size_t n = bytes_ / size_t(dtype_size(dt));
  std::vector<std::byte> nan(bytes_);
  for (size_t i = 0; i < n; ++i) util::store_from_float(nan.data() + i * size_t(dtype_size(dt)), dt, NAN);
  upload(nan);
}

double time_ms(Device device, const std::function<Status()>& fn) {
  auto run = [&] {
    Status st = fn();
    if (!st.ok()) throw std::runtime_error(st.message);
  };
  if (device == Device::CPU) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
#ifdef FASTATTN_WITH_CUDA
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "cudaEventCreate");
  cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  cuda_check(cudaEventRecord(start, nullptr), "cudaEventRecord");
  run();
  cuda_check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
  cuda_check(cudaEventSynchronize(stop), "kernel");
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
#else
  throw std::runtime_error("this build has no CUDA support");
#endif
}

bool cuda_compiled_in() {
#ifdef FASTATTN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<std::string> describe_cuda_devices() {
#ifdef FASTATTN_WITH_CUDA
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess)
    return {std::string("no CUDA device: ") + cudaGetErrorString(e)};
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, i);
    char rest[96];
    std::snprintf(rest, sizeof rest, ", sm_%d%d, %d SMs, %.1f GiB", p.major, p.minor,
                  p.multiProcessorCount, double(p.totalGlobalMem) / (1 << 30));
    lines.push_back(std::to_string(i) + ": " + p.name + rest);
  }
  if (lines.empty()) lines.push_back("no CUDA device");
  return lines;
#else
  return {"CUDA not compiled in (CPU-only build)"};
#endif
}

std::string device_name(Device device) {
  if (device == Device::CPU)
    return "cpu (" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads)";
#ifdef FASTATTN_WITH_CUDA
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess)
    return std::string("cuda:") + std::to_string(dev) + " " + p.name;
#endif
  return "cuda";
}

}  // namespace fastattn::cli
