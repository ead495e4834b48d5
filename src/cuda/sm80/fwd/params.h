// The Ampere forward kernel's parameter struct: the problem every family shares (AttnParams), the
// schedule (plan_schedule's, read for its tile order only: one CTA per tile), and where Q, K and V
// live. The sm80 path loads with cp.async from plain pointers, so it takes element strides where the
// Hopper kernels take TMA maps.
#pragma once

#include <cstdint>

#include "cuda/common/attn_params.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::sm80 {

// One operand: element (batch coordinate b, token t, head h, column x) at b * b + t * s + h * h + x
// (varlen: b = 0 and t the packed token; cuda_backend::SeqInfo gives both).
struct Operand80 {
  const void* data = nullptr;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;
};

struct Sm80FwdParams {
  cuda_backend::AttnParams attn;
  cuda_backend::TileSchedule sched;
  Operand80 q, k, v;
};

}  // namespace fastattn::sm80
