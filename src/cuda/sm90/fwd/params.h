// The Hopper forward kernel's parameter struct: the problem every family shares, the schedule, and
// the sm90 forward's own store mode for O. One __grid_constant__ argument; field order is the
// parameter-bank layout (the schedule's fields keep their offsets, see docs/notes/arch-refactor.md).
#pragma once

#include "cuda/common/attn_params.h"
#include "cuda/common/kv_cache_params.h"
#include "cuda/sched/tile_schedule.h"

namespace fastattn::sm90 {

// How the epilogue writes O (chosen by the launch from the config and out's layout).
struct alignas(8) FwdStoreMode {
  int out_tma = 0;    // store O through smem with TMA (fixed-length, TMA-compatible out layout)
  int out_vec16 = 0;  // out's base and row strides are 16-byte aligned: 16-byte register stores
};

struct FwdParams {
  cuda_backend::AttnParams attn;
  cuda_backend::TileSchedule sched;
  FwdStoreMode store;
  cuda_backend::KvCacheParams kv;  // where K/V rows live when reading a KV cache (producer.cuh)
};

}  // namespace fastattn::sm90
