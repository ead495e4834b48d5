// The CLI's attention problem: random host inputs, their copies on the run device, the output
// buffers and the AttnArgs that point at them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "device.h"
#include "options.h"

namespace fastattn::cli {

// Inputs in host memory, stored in the run dtype, contiguous (b, s, h, d).
struct HostInputs {
  std::vector<std::byte> q, k, v, dout;  // dout only with --backward
};

// Normal(0, 1) values rounded to the dtype. Each element is a hash of (seed, tensor, index), so
// the inputs do not depend on the number of threads that fill them.
HostInputs random_inputs(const RunOptions& o);

// The call's arguments over the given buffers (contiguous layouts of the options' shapes).
AttnArgs make_args(const RunOptions& o, Device device, void* q, void* k, void* v, void* out,
                   void* lse);

// Buffers on the run device; outputs start poisoned with NaN.
struct DeviceProblem {
  DeviceBuffer q, k, v, out, lse, dout, dq, dk, dv;
  AttnArgs args;
  Tensor dout_t, dq_t, dk_t, dv_t;
};
DeviceProblem upload(const RunOptions& o, Device device, const HostInputs& in);

// "b=4 s_q=4096 s_k=4096 h=32 h_kv=8 d=128 d_v=128 bf16 causal" (+ window, softcap when set).
std::string describe_problem(const RunOptions& o);

// Contiguous (batch, rows, heads, dim) tensors over `data`: q-like ones have the query heads
// (q, out, dout, dq), kv-like ones the key/value heads (k, v, dk, dv).
Tensor q_like(const RunOptions& o, void* data, DType dt, int64_t batch, int64_t rows, int64_t dim,
              Device device = Device::CPU);
Tensor kv_like(const RunOptions& o, void* data, DType dt, int64_t batch, int64_t rows, int64_t dim,
               Device device = Device::CPU);

}  // namespace fastattn::cli
