// fp32 <-> element type (half, bfloat16, float) for the small standalone kernels (KV-cache append,
// split combine), which are templated on the element type of the tensors they read and write.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fastattn::cuda_backend {

__device__ inline float to_f32(__half x) { return __half2float(x); }
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_f32(float x) { return x; }

template <typename T>
__device__ inline T from_f32(float x);
template <>
__device__ inline __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ inline float from_f32<float>(float x) { return x; }

}  // namespace fastattn::cuda_backend
