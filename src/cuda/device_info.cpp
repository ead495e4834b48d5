#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace fastattn::cuda_backend {

namespace {

// A device attribute, queried once per device; no synchronisation, so launches stay capturable
// in CUDA graphs.
template <cudaDeviceAttr Attr>
Status cached_attribute(const char* what, int* out) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return {Code::CudaError, std::string("cudaGetDevice: ") + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxDevices && (*out = cache[dev].load(std::memory_order_relaxed)) > 0)
    return Status::Ok();
  int n = 0;
  e = cudaDeviceGetAttribute(&n, Attr, dev);
  if (e != cudaSuccess || n <= 0) return {Code::CudaError, std::string(what) + ": " + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxDevices) cache[dev].store(n, std::memory_order_relaxed);
  *out = n;
  return Status::Ok();
}

}  // namespace

Status sm_count(int* out) {
  return cached_attribute<cudaDevAttrMultiProcessorCount>("multiprocessor count", out);
}

Status compute_major(int* out) {
  return cached_attribute<cudaDevAttrComputeCapabilityMajor>("compute capability", out);
}

Status l2_bytes(int* out) { return cached_attribute<cudaDevAttrL2CacheSize>("L2 cache size", out); }

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
