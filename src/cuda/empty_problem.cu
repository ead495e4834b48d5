// Fill kernel behind forward_empty and backward_empty: any strided tensor of up to 4 dims, one thread per element.
// Strided rather than cudaMemsetAsync because out may be a view with gaps between rows, and those
// gaps belong to the caller.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cuda/empty_problem.h"

namespace fastattn::cuda_backend {
namespace {

struct StridedView {
  char* data;
  int64_t numel;
  int64_t shape[4];   // innermost last; leading dims of lower rank are 1
  int64_t stride[4];  // in elements
  int elem_bytes;     // 2 or 4
};

__global__ void fill_strided(StridedView v, uint32_t bits) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < v.numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, off = 0;
    for (int d = 3; d >= 0; --d) {
      off += (rest % v.shape[d]) * v.stride[d];
      rest /= v.shape[d];
    }
    if (v.elem_bytes == 2) {
      reinterpret_cast<uint16_t*>(v.data)[off] = uint16_t(bits);
    } else {
      reinterpret_cast<uint32_t*>(v.data)[off] = bits;
    }
  }
}

StridedView view_of(const Tensor& t) {
  StridedView v{static_cast<char*>(t.data), t.numel(), {1, 1, 1, 1}, {0, 0, 0, 0}, dtype_size(t.dtype)};
  const int lead = 4 - t.ndim;
  for (int i = 0; i < t.ndim; ++i) {
    v.shape[lead + i] = t.shape[i];
    v.stride[lead + i] = t.stride[i];
  }
  return v;
}

Status fill(const Tensor& t, uint32_t bits, cudaStream_t stream, const char* name) {
  const StridedView v = view_of(t);
  if (v.numel == 0) return Status::Ok();
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((v.numel + kThreads - 1) / kThreads, 4096);
  fill_strided<<<unsigned(blocks), kThreads, 0, stream>>>(v, bits);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {Code::CudaError, std::string(name) + ": filling an empty problem's output failed: " +
                                 cudaGetErrorString(err)};
  }
  return Status::Ok();
}

}  // namespace

Status forward_empty(const AttnArgs& a, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  constexpr uint32_t kMinusInfF32 = 0xFF800000u;
  Status st = fill(a.out, 0u, s, "out");  // +0 has all bits clear in fp16, bf16 and fp32
  if (st.ok() && a.lse.defined()) st = fill(a.lse, kMinusInfF32, s, "lse");
  return st;
}

Status backward_empty(const AttnArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  Status st = fill(dq, 0u, s, "dq");
  if (st.ok()) st = fill(dk, 0u, s, "dk");
  if (st.ok()) st = fill(dv, 0u, s, "dv");
  if (st.ok() && a.dbias.defined()) st = fill(a.dbias, 0u, s, "dbias");
  return st;
}

}  // namespace fastattn::cuda_backend
