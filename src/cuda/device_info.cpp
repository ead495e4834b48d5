#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace fastattn::cuda_backend {

Status sm_count(int* out) {
  // Queried once per device; no synchronisation, so launches stay capturable in CUDA graphs.
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return {Code::CudaError, std::string("cudaGetDevice: ") + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxDevices && (*out = cache[dev].load(std::memory_order_relaxed)) > 0)
    return Status::Ok();
  int n = 0;
  e = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess || n <= 0)
    return {Code::CudaError, std::string("multiprocessor count: ") + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxDevices) cache[dev].store(n, std::memory_order_relaxed);
  *out = n;
  return Status::Ok();
}

Status persistent_grid(int tiles, int* ctas) {
  int sms = 0;
  Status st = sm_count(&sms);
  if (!st.ok()) return st;
  *ctas = std::min(tiles, sms);
  if (const char* cap = std::getenv("FASTATTN_MAX_CTAS")) {
    const int n = std::atoi(cap);
    if (n > 0) *ctas = std::min(*ctas, n);
  }
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
