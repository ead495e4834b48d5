// Run-time A/B switches read per call from the environment, so that one process measures both sides of a
// change (docs/notes record which switch each measurement used). Host code only.
#pragma once

#include <cstdlib>
#include <cstring>

namespace fastattn::cuda_backend {

// `name` unset: `on_by_default`. A switch that is on by default is turned off by "0" only; one that is off
// by default is turned on by "1" only (any other value keeps the default).
inline bool env_switch(const char* name, bool on_by_default) {
  const char* v = std::getenv(name);
  if (v == nullptr) return on_by_default;
  return on_by_default ? std::strcmp(v, "0") != 0 : std::strcmp(v, "1") == 0;
}

}  // namespace fastattn::cuda_backend
