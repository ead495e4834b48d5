// FASTATTN_FORCE_ARCH's values (cuda/device_info.h forced_arch_major): the one parsing rule that the
// CUDA backend and the CPU tests share. Host only, no CUDA headers.
#pragma once

namespace fastattn::cuda_backend {

// A value that names no arch this build can force: the CUDA backend refuses every call by name
// (a typo such as "sm80" must not silently run the device's own kernels in a test or benchmark).
constexpr int kForcedArchInvalid = -1;

// The value as a compute capability major: "80", "86", "89" or "8" -> 8, "90" or "9" -> 9, "100" ->
// 10 (a major above the device's own is ignored: compute_major); null, empty or "0" -> 0 (not
// forced); anything else (not all digits, or a major below 8, which has no kernels) ->
// kForcedArchInvalid.
inline int parse_forced_arch(const char* value) {
  if (value == nullptr) return 0;
  int n = 0;
  for (const char* c = value; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || n > 1000) return kForcedArchInvalid;
    n = n * 10 + (*c - '0');
  }
  if (n == 0) return *value == '\0' || *value == '0' ? 0 : kForcedArchInvalid;
  const int major = n >= 10 ? n / 10 : n;
  return major >= 8 ? major : kForcedArchInvalid;
}

// For messages: the values it takes.
inline const char* forced_arch_values_text() {
  return "80, 86, 89 or 8 (the sm80 path), 90 or 9 (Hopper's own); unset, empty or 0: the device's own";
}

}  // namespace fastattn::cuda_backend
