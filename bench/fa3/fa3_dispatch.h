// What the forward and backward dispatchers (fa3_peer.cu, fa3_bwd_peer.cu with FA3_DISPATCH) share:
// the mask codes of the variant lists, the last error of the calling thread, and the launch of a
// variant entry with its error check. Each dispatcher keeps its own error string.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

namespace {
constexpr int kFull = 0, kCausal = 1, kLocal = 2;
// "full", "causal", "local" as a variant list spells them.
constexpr int mask_code(const char* m) { return m[0] == 'f' ? kFull : m[0] == 'c' ? kCausal : kLocal; }

thread_local std::string g_error;

int fail(std::string msg) {
  g_error = std::move(msg);
  return 1;
}

// Runs entry(params, stream) and returns 0, or 1 with g_error set when the launch failed.
template <typename Entry, typename Params>
int launch(Entry entry, Params& params, cudaStream_t stream) {
  entry(params, stream);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? 0 : fail(std::string("fa3 peer: ") + cudaGetErrorString(e));
}
}  // namespace
