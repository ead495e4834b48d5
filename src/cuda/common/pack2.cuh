// Two fp32 values rounded to a 16-bit type and packed in one 32-bit register (low = first), the
// layout of an MMA A fragment pair and of a 4-byte store. (The forward's fwd_kernel.cuh still has its
// own copy, sm90::pack2, until its pieces move out of the kernel file: issue #28 item 3.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

namespace fastattn::cuda_backend {

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace fastattn::cuda_backend
