// Host conversions between float and the 16-bit formats (IEEE binary16, bfloat16).
// Float -> 16-bit rounds to nearest, ties to even, like the GPU's cvt.rn; NaN stays NaN,
// overflow goes to infinity. No CUDA headers: the CPU backend, the reference and the tests
// all read and write fp16/bf16 through these.
#pragma once

#include <bit>
#include <cstdint>

#include "fastattn/types.h"

namespace fastattn::util {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float.
    const float mag = float(man) * 0x1p-24f;
    return sign ? -mag : mag;
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN (keep NaN quiet)
    return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  }
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5 puts the value where float's ulp is
    // 2^-24, the half subnormal step, so the FPU does the round-to-nearest-even for us.
    const float shifted = std::bit_cast<float>(ax) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(shifted) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  const uint32_t odd = (ax >> 13) & 1u;
  ax += 0xc8000fffu + odd;
  return uint16_t(sign | (ax >> 13));
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t odd = (x >> 16) & 1u;
  return uint16_t((x + 0x7fffu + odd) >> 16);
}

// One element of any supported dtype, at `p`, as float.
inline float load_as_float(const void* p, DType dt) {
  switch (dt) {
    case DType::F16: return half_to_float(*static_cast<const uint16_t*>(p));
    case DType::BF16: return bf16_to_float(*static_cast<const uint16_t*>(p));
    case DType::F32: break;
  }
  return *static_cast<const float*>(p);
}

// Stores `f` rounded to `dt` at `p`.
inline void store_from_float(void* p, DType dt, float f) {
  switch (dt) {
    case DType::F16: *static_cast<uint16_t*>(p) = float_to_half(f); return;
    case DType::BF16: *static_cast<uint16_t*>(p) = float_to_bf16(f); return;
    case DType::F32: break;
  }
  *static_cast<float*>(p) = f;
}

// Rounds a float to the nearest value representable in `dt`.
inline float round_to(DType dt, float f) {
  switch (dt) {
    case DType::F16: return half_to_float(float_to_half(f));
    case DType::BF16: return bf16_to_float(float_to_bf16(f));
    case DType::F32: break;
  }
  return f;
}

}  // namespace fastattn::util
