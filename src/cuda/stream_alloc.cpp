#include "cuda/stream_alloc.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace fastattn::cuda_backend {
namespace {

constexpr int kMaxDevices = 64;
// What a pool keeps across synchronizations: decode workspaces are kilobytes to a few megabytes, a
// backward's dQ accumulator 4 bytes per q row and head dim (33 MB at b1 s4k h16 d128); anything
// above this goes back at the next synchronize, as from the default pool (memory fastattn holds is
// invisible to torch's allocator, so it holds little).
constexpr uint64_t kKeepBytes = uint64_t(64) << 20;

}  // namespace

cudaMemPool_t workspace_pool() {
  static std::array<cudaMemPool_t, kMaxDevices> pools{};
  static std::array<bool, kMaxDevices> tried{};
  static std::mutex mu;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried[dev]) {
    tried[dev] = true;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) == cudaSuccess) {
      uint64_t keep = kKeepBytes;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
      pools[dev] = pool;
    } else {
      cudaGetLastError();
    }
  }
  return pools[dev];
}

namespace {

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;  // e.g. the legacy stream while another captures: leave it to cudaMallocAsync
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

Status stream_alloc(size_t bytes, cudaStream_t stream, const char* what, void** out) {
  cudaMemPool_t pool = capturing(stream) ? nullptr : workspace_pool();
  const cudaError_t e = pool != nullptr ? cudaMallocFromPoolAsync(out, bytes, pool, stream)
                                        : cudaMallocAsync(out, bytes, stream);
  if (e == cudaSuccess) return Status::Ok();
  cudaGetLastError();
  return {Code::CudaError, std::string(what) + ": stream-ordered allocation of " + std::to_string(bytes) +
                               " bytes failed: " + cudaGetErrorString(e)};
}

cudaError_t stream_free(void* p, cudaStream_t stream) { return cudaFreeAsync(p, stream); }

}  // namespace fastattn::cuda_backend
