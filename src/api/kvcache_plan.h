// The resolved description of one forward_kvcache call: sizes, where each sequence's keys live
// in the cache, and host copies of the index arrays. Validation produces it; the host and CUDA
// paths both run on it.
#pragma once

#include <cstdint>
#include <vector>

#include "fastattn/kvcache.h"

namespace fastattn::detail {

struct KvCachePlan {
  Backend backend = Backend::CPU;  // resolved: never Auto
  int32_t batch = 0, seqlen_q = 0, heads_q = 0, heads_kv = 0, head_dim = 0, head_dim_v = 0;
  int32_t seqlen_new = 0;     // tokens appended per sequence (0 without k_new)
  int32_t capacity = 0;       // positions one sequence's cache holds
  int32_t page_size = 0;      // 0: contiguous cache
  int32_t pages_per_seq = 0;
  int32_t rotary_dim = 0;     // 0: no rotary embedding
  bool q_rows_advance = false;  // causal or local: query row i sits at position n + i, else at n
  float scale = 0.0f;         // resolved softmax scale

  // Host copies of the index arrays (empty when absent). On a device with check_index_arrays off
  // they are not read (index_read false) and only the CUDA path runs.
  bool index_read = false;
  std::vector<int32_t> seqlens, batch_idx, leftpad, pages;

  int32_t cached(int64_t b) const { return seqlens.empty() ? capacity : seqlens[size_t(b)]; }
  int32_t first_key(int64_t b) const { return leftpad.empty() ? 0 : leftpad[size_t(b)]; }
  int32_t keys(int64_t b) const { return cached(b) + seqlen_new - first_key(b); }

  // (index along the cache's dim 0, index along dim 1) of sequence b's position `pos`.
  struct Slot {
    int64_t row, pos;
  };
  Slot slot(int64_t b, int64_t pos) const {
    if (page_size > 0) return {pages[size_t(b * pages_per_seq + pos / page_size)], pos % page_size};
    return {batch_idx.empty() ? b : batch_idx[size_t(b)], pos};
  }
};

// The attention's scalars (scale, causal, windows, softcap, splits, threads) as forward() takes
// them, for backend `be`.
AttnArgs attention_scalars(const KvCacheArgs& a, Backend be);

// An error of the attention's own checks, its operands k and v renamed to the caches they are.
Status as_cache_error(Status st);

// Checks every rule of forward_kvcache (rule by rule, like validate.cpp) and resolves the plan.
// Touches no output and not the cache.
Status prepare_kvcache(const KvCacheArgs& args, KvCachePlan* plan);

}  // namespace fastattn::detail
