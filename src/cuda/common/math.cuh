// Small conversions shared by the kernels of every arch: pack2 turns two fp32 values into the
// packed pair of T (fp16 or bf16) that MMA operands and 32-bit stores take, rounding to nearest;
// unpack2 / to_float read such pairs and elements back; out_pair is the forward epilogues' output pair.
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

// The inverse: a packed pair of T (a 32-bit load of two adjacent elements) as two fp32 values, and
// one element as fp32 (the forward's bias reads, sm90/fwd/mainloop.cuh).
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t w);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
  // bf16 is fp32's high half: one shift and one mask (the intrinsic's high half takes a PRMT and a shift)
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// The forward epilogues' output pair (lo, hi) x inv of one row, packed; exactly 0 where inv is 0 (a row
// past seqused_q, or one that keeps no key). A select: a row past seqused_q may hold NaN in Q, and
// NaN x 0 is NaN. (A row whose softmax sum is NaN has inv NaN, OnlineSoftmax::finish: NaN propagates.)
template <class T>
__device__ __forceinline__ uint32_t out_pair(float lo, float hi, float inv) {
  const uint32_t w = pack2<T>(lo * inv, hi * inv);
  return inv == 0.f ? 0u : w;
}

}  // namespace fastattn::cuda_backend
