// Stream-ordered workspace memory for the launches (split-KV partials, the KV-cache call's key
// counts, the backward's dQ accumulator and row scalars): no host sync, capturable in CUDA graphs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// `bytes` of device memory usable on `stream` from now on. Outside graph capture it comes from a
// pool of fastattn's own per device that keeps what it holds across synchronizations (the device's
// default pool keeps nothing: after each synchronize its next allocation maps memory again, tens
// of microseconds on the host); under capture from cudaMallocAsync (a graph allocation node).
// `what` names the workspace in the error message.
Status stream_alloc(size_t bytes, cudaStream_t stream, const char* what, void** out);

// The current device's pool of fastattn's own, created on first use; nullptr when it cannot be
// (stream_alloc then takes the device's default pool).
cudaMemPool_t workspace_pool();

// Frees memory from stream_alloc once `stream` reaches this point.
cudaError_t stream_free(void* p, cudaStream_t stream);

}  // namespace fastattn::cuda_backend
