// Validation + resolution in one step: the checks behind validate_forward/validate_backward,
// and the Problem every backend runs on. Nothing here writes to an output tensor.
#pragma once

#include "api/index_arrays.h"
#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::detail {

struct Prepared {
  Backend backend = Backend::CPU;  // resolved: never Auto
  Problem problem;                 // seqs empty when the index arrays could not be read
  GradOperands grads;              // backward only
  HostIndexArrays index;
};

// The scalar arguments (mask kind, backend code, num_threads, scale, softcap, windows).
Status check_scalars(const AttnArgs& args);

// The chosen backend can take tensors where q lives (checked before reading index arrays, which
// may need a copy from the device).
Status check_backend_device(const Tensor& q, Backend be);

// Auto -> CUDA for tensors on a CUDA device, else CPU.
Backend resolve_backend(const AttnArgs& args);

Status prepare_forward(const AttnArgs& args, Prepared* out);

// The forward of args already prepared by prepare_forward (dispatch.cpp): for callers that must
// know a call is valid before they write anything else (forward_kvcache's cache append).
Status run_forward(const AttnArgs& args, const Prepared& prepared, void* stream);
Status prepare_backward(const AttnArgs& args, const Tensor& dout, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv, Prepared* out);

}  // namespace fastattn::detail
