// fastattn: fused attention kernels (Hopper, Ampere, CPU). Public C++ API.
//
//   fastattn::AttnArgs a;  a.q = ...; a.k = ...; a.v = ...; a.out = ...; a.lse = ...;
//   a.causal = true;
//   fastattn::Status st = fastattn::forward(a, stream);
//   if (!st.ok()) std::cerr << st.message;
//
// See types.h for layouts and the mask conventions.
#pragma once

#include "fastattn/kvcache.h"
#include "fastattn/export.h"
#include "fastattn/types.h"

namespace fastattn {

// Checks every argument (shapes, dtypes, strides, head dims of the chosen backend, GQA ratio,
// cu_seqlens, windows, scale, pointers) without touching any output.
FASTATTN_API Status validate_forward(const AttnArgs& args);
FASTATTN_API Status validate_backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq,
                                      const Tensor& dk, const Tensor& dv);

// out = softmax(mask(scale * q k^T)) v, lse = logsumexp of the masked scaled scores (natural log).
// `stream` is a cudaStream_t for the CUDA backend (nullptr = default stream); ignored on the CPU.
FASTATTN_API Status forward(const AttnArgs& args, void* stream = nullptr);

// Gradients of forward. Reads args.q/k/v/out/lse (lse as written by forward); writes dq, dk, dv
// (same shapes and dtypes as q, k, v). CUDA (sm_90a, head dims 64/96/128/192/256 and d_qk 192
// with d_v 128, those of them this build holds): the workspace (an fp32 dQ accumulator and two
// fp32 scalars per q row, padded to the kernel's q-block) is allocated and freed on `stream`
// (fastattn's stream-ordered pool, which keeps up to 64 MiB mapped across synchronizes;
// cudaMallocAsync under graph capture): the call is stream-ordered and can be captured in a CUDA
// graph (with check_index_arrays off for varlen). args.deterministic makes dq bitwise
// reproducible (dk and dv always are).
FASTATTN_API Status backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                             const Tensor& dv, void* stream = nullptr);

// What this build and machine can run.
FASTATTN_API bool cuda_available();  // CUDA kernels compiled in and a device present
FASTATTN_API const char* version();
FASTATTN_API const char* build_info();  // archs, dtypes, head dims, kernel count

}  // namespace fastattn
