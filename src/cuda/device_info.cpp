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
  static std::atomic<int> cache[kMaxCachedDevices] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return {Code::CudaError, std::string("cudaGetDevice: ") + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxCachedDevices && (*out = cache[dev].load(std::memory_order_relaxed)) > 0)
    return Status::Ok();
  int n = 0;
  e = cudaDeviceGetAttribute(&n, Attr, dev);
  if (e != cudaSuccess || n <= 0) return {Code::CudaError, std::string(what) + ": " + cudaGetErrorString(e)};
  if (dev >= 0 && dev < kMaxCachedDevices) cache[dev].store(n, std::memory_order_relaxed);
  *out = n;
  return Status::Ok();
}

}  // namespace

Status sm_count(int* out) {
  return cached_attribute<cudaDevAttrMultiProcessorCount>("multiprocessor count", out);
}

namespace {
// kNotRead until the first call. The environment is read once; the tests set it through
// set_forced_arch_major. kForcedArchInvalid: the variable names no arch (compute_major refuses).
constexpr int kNotRead = -2;
std::atomic<int> forced_major{kNotRead};
}  // namespace

int forced_arch_major() {
  int m = forced_major.load(std::memory_order_relaxed);
  if (m != kNotRead) return m;
  m = parse_forced_arch(std::getenv("FASTATTN_FORCE_ARCH"));
  int expected = kNotRead;
  forced_major.compare_exchange_strong(expected, m, std::memory_order_relaxed);
  return forced_major.load(std::memory_order_relaxed);
}

void set_forced_arch_major(int major) { forced_major.store(major > 0 ? major : 0, std::memory_order_relaxed); }

void reread_forced_arch() { forced_major.store(kNotRead, std::memory_order_relaxed); }

Status compute_major(int* out) {
  const int forced = forced_arch_major();
  if (forced == kForcedArchInvalid) {
    const char* value = std::getenv("FASTATTN_FORCE_ARCH");
    return Status::Invalid(std::string("FASTATTN_FORCE_ARCH: '") + (value != nullptr ? value : "") +
                           "' names no arch this build can force; expected " + forced_arch_values_text());
  }
  Status st = cached_attribute<cudaDevAttrComputeCapabilityMajor>("compute capability", out);
  if (!st.ok()) return st;
  if (forced > 0 && forced < *out) *out = forced;
  return Status::Ok();
}

Status l2_bytes(int* out) { return cached_attribute<cudaDevAttrL2CacheSize>("L2 cache size", out); }

Status hbm_bytes_per_s(double* out) {
  int khz = 0, bits = 0;
  *out = 0;
  const bool clean = cudaPeekAtLastError() == cudaSuccess;  // an earlier error stays for its owner to see
  if (!cached_attribute<cudaDevAttrMemoryClockRate>("memory clock", &khz).ok() ||
      !cached_attribute<cudaDevAttrGlobalMemoryBusWidth>("memory bus width", &bits).ok()) {
    if (clean) (void)cudaGetLastError();  // an attribute this device does not report: not an error of the call
    return Status::Ok();
  }
  *out = 2.0 * khz * 1e3 * bits / 8;
  return Status::Ok();
}

Status smem_per_sm(int* out) {
  return cached_attribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>("shared memory per multiprocessor", out);
}

Status current_device(int* dev) {
  const cudaError_t e = cudaGetDevice(dev);
  if (e != cudaSuccess) return {Code::CudaError, std::string("cudaGetDevice: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

Status set_max_dynamic_smem(const void* kernel, int bytes, PerDeviceFlags& done) {
  int dev = 0;
  if (Status st = current_device(&dev); !st.ok()) return st;
  static_assert(kMaxCachedDevices <= 64, "one bit a device");
  const uint64_t bit = dev >= 0 && dev < kMaxCachedDevices ? uint64_t(1) << dev : 0;
  if (bit != 0 && (done.bits.load(std::memory_order_relaxed) & bit) != 0) return Status::Ok();
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return {Code::CudaError, std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e)};
  done.bits.fetch_or(bit, std::memory_order_relaxed);  // racing first calls set the same value
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
