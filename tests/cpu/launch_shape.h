// Host-side launch shapes for the CPU tests of the tile schedule (sched/): a problem's kernel-side
// parameters and its schedule, filled as cuda/launch_plan.cpp fills them, minus the device queries.
#pragma once

#include <cstdint>

#include "cuda/common/attn_params.h"
#include "cuda/mask/mask_class.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/tile_order.cuh"
#include "cuda/sched/tile_space.h"

namespace fastattn::cuda_backend {

// A launch's problem and schedule, as the tests build them.
struct Launch {
  AttnParams a;
  TileSchedule s;
};

// The tile space and candidate order (sched/tile_space.h) on `rows`-row tiles, register stores.
inline int64_t set_tile_space(Launch& p, bool varlen, int rows = 128) {
  static const int32_t kVarlen[1] = {0};
  p.a.cu_seqlens_q = varlen ? kVarlen : nullptr;
  const GqaPack pack = choose_gqa_pack(p.a.q_per_kv, p.a.seqlen_q, varlen);
  return plan_tile_space(p.a, classify_mask(p.a.window_left, p.a.window_right), pack, rows, true, p.s);
}

inline TileCoord tile_coord(const Launch& p, int id) {
  return tile_coord(p.s, tile_divisors(p.s, p.a.heads_kv), p.a, id);
}


}  // namespace fastattn::cuda_backend
