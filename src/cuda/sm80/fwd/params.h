// The Ampere forward kernel's parameter struct: the problem every family shares (AttnParams), the
// schedule (plan_schedule's, read for its tile order only: one CTA per tile), and where Q, K and V
// live. The sm80 path loads with cp.async from plain pointers, so it takes element strides where the
// Hopper kernels take TMA maps.
#pragma once

#include <cstdint>

#include "cuda/common/attn_params.h"
#include "cuda/common/fast_div.h"
#include "cuda/common/kv_cache_params.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::sm80 {

// One operand: element (batch coordinate b, token t, head h, column x) at b * b + t * s + h * h + x
// (varlen: b = 0 and t the packed token; cuda_backend::SeqInfo gives both).
struct Operand80 {
  const void* data = nullptr;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;
};

// Split-KV partials (the decode kernel, kernel.cuh's kDecode): grid = schedule tiles x splits, split
// innermost; split s of a tile walks share s of its key blocks (split_share) and writes its rows as fp32
// partials, O normalised by its own sum, in split_combine.h's (b, h, i) order. splits = 1 and o_part
// null: no split, out and lse written as the plain kernel does.
struct Sm80Split {
  cuda_backend::FastDiv splits;
  float* o_part = nullptr;    // (splits, rows, d_v)
  float* lse_part = nullptr;  // (splits, rows)
  int64_t rows = 0;           // rows of one split
  int64_t rows_per_head = 0;  // seqlen_q, or total_q when varlen
};

struct Sm80FwdParams {
  cuda_backend::AttnParams attn;
  cuda_backend::TileSchedule sched;
  Operand80 q, k, v;
  // The decode kernel only: a KV cache's addressing (cache row, left padding, page table; k / v's
  // stride_b is then the cache row's or the page's) and the split-KV partials.
  cuda_backend::KvCacheParams kv;
  Sm80Split split;
};

}  // namespace fastattn::sm80
