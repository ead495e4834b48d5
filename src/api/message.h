// Builds validation messages from pieces: msg("q: expected ", 4, " dims").
#pragma once

#include <sstream>
#include <string>

#include "fastattn/types.h"

namespace fastattn::detail {

template <typename... Parts>
std::string msg(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// "(2, 128, 8, 64)"
inline std::string shape_string(const Tensor& t) {
  std::ostringstream os;
  os << '(';
  for (int32_t i = 0; i < t.ndim; ++i) os << (i ? ", " : "") << t.shape[i];
  os << ')';
  return os.str();
}

inline std::string device_string(const Tensor& t) {
  return t.device == Device::CPU ? std::string("cpu") : msg("cuda:", t.device_index);
}

}  // namespace fastattn::detail
