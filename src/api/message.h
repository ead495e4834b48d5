// Builds validation messages from pieces: msg("q: expected ", 4, " dims").
//
// No iostreams on purpose: a Python extension linked against a statically linked libstdc++ (the
// GCC 13 toolchain on our device image does this) may find the stream locale uninitialised, and
// the first number put through an ostringstream crashed there (issue #5, test_heads_not_divisible).
// snprintf needs no locale set-up.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>

#include "fastattn/types.h"

namespace fastattn::detail {

inline void append_part(std::string& s, const char* p) { s += p; }
inline void append_part(std::string& s, const std::string& p) { s += p; }
inline void append_part(std::string& s, char c) { s += c; }

template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void append_part(std::string& s, T v) {
  char buf[32];
  if constexpr (std::is_same_v<T, bool>) {
    s += v ? "true" : "false";
    return;
  } else if constexpr (std::is_floating_point_v<T>) {
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  } else if constexpr (std::is_signed_v<T>) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  }
  s += buf;
}

template <typename... Parts>
std::string msg(const Parts&... parts) {
  std::string s;
  (append_part(s, parts), ...);
  return s;
}

// "(2, 128, 8, 64)"
inline std::string shape_string(const Tensor& t) {
  std::string s = "(";
  for (int32_t i = 0; i < t.ndim; ++i) s += msg(i ? ", " : "", t.shape[i]);
  return s + ")";
}

inline std::string device_string(const Tensor& t) {
  return t.device == Device::CPU ? std::string("cpu") : msg("cuda:", t.device_index);
}

}  // namespace fastattn::detail
