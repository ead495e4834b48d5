// Where a forward reading a KV cache (forward_kvcache) finds sequence b's keys and values, as the
// kernel's producer addresses them (detail::CacheLayout on the host). All null / 0 for every other
// call: sequence b is then batch entry b of k/v from the sequence's own k offset.
#pragma once

#include <cstdint>

#include "cuda/common/fast_div.h"

namespace fastattn::cuda_backend {

struct KvCacheParams {
  const int32_t* batch_idx = nullptr;   // cache row of sequence b; null: b
  const int32_t* leftpad = nullptr;     // position of sequence b's first key; null: 0
  const int32_t* page_table = nullptr;  // (batch, pages_per_seq) page of each page_size keys; null: not paged
  int pages_per_seq = 0;
  FastDiv page_size;  // positions per page (a multiple of 16)
  // Paged: keys per TMA box, gcd(page_size, the config's kBlockN) (set by the launcher): a key
  // block then splits into boxes that each lie in one page, at 16-row (2 KB) smem steps, so the
  // 128-byte swizzle lands as one box of kBlockN rows would.
  int box_rows = 0;
};

}  // namespace fastattn::cuda_backend
