// Host planning of a CUDA launch, shared by every kernel family and arch: the problem's kernel-side
// parameters, mask class and GQA packing, each derived once from the resolved detail::Problem
// (LaunchProblem), and the tile schedule, filled once after the launcher has chosen its kernel
// config (plan_schedule).
#pragma once

#include <cstdint>

#include "api/problem.h"
#include "cuda/common/attn_params.h"
#include "cuda/common/kv_cache_params.h"
#include "cuda/mask/mask_class.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/tile_schedule.h"
#include "cuda/sched/tile_space.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// What every launcher of one call starts from.
struct LaunchProblem {
  const detail::Problem* problem = nullptr;
  AttnParams attn;
  KvCacheParams kv;  // forward_kvcache's cache addressing (all null otherwise); box_rows is the launcher's
  MaskClass mask = MaskClass::None;
  GqaPack pack;  // GQA head packing (short queries), or none
  int num_splits = 1;  // split-KV as requested: > 0 as given, 0 = chosen per launch (sched/split_plan.h)
  bool kvcache_call = false;  // Problem::kvcache_call
};

LaunchProblem make_launch_problem(const detail::Problem& p);

// What the launcher's chosen config fixes for the schedule.
struct ScheduleShape {
  int tile_rows = 128;              // query rows per tile
  bool pad_first_ok = true;         // padding rows may go to a sequence's first m-block (no TMA store of O)
  int64_t kv_bytes_per_slot = 0;    // K and V bytes one (batch, head) slot reads: the L2 section width
  const TileSpace* planned = nullptr;  // the tile space when the launcher planned it already (same rows and flag)
};

// The schedule of a persistent launch (tile space, order, sections, divisors), and its grid size
// (0 when there are no tiles: nothing to launch).
Status plan_schedule(const LaunchProblem& lp, const ScheduleShape& shape, TileSchedule* s, int* ctas);

}  // namespace fastattn::cuda_backend
