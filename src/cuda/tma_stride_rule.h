// The stride rule of a TMA-read (or stored) operand, host only and without CUDA headers (the KV cache's
// own check runs in every build): a dim of more than one element needs a positive stride of a multiple
// of 16 bytes. TMA descriptors take no broadcast (stride 0) or reversed (negative) dim.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

inline bool tma_stride_ok(int64_t extent, int64_t stride_elems, int64_t elem_bytes) {
  return extent <= 1 || (stride_elems > 0 && (stride_elems * elem_bytes) % 16 == 0);
}

}  // namespace fastattn::cuda_backend
