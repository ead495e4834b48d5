// forward_kvcache on the CUDA backend: the append/rotary kernel, then the CUDA forward over the
// cache with seqused_k = cache_seqlens + seqlen_new (counted on the device: no host sync).
#pragma once

#include <cstddef>

#include "api/kvcache_plan.h"
#include "fastattn/kvcache.h"

namespace fastattn::detail {

// Runs a validated and planned call; without CUDA in the build, NotSupported.
Status cuda_kvcache(const KvCacheArgs& a, const KvCachePlan& p, void* stream);

// Bytes of workspace the call needs: the key counts, and the rotated q when rotary is on.
size_t cuda_kvcache_workspace(const KvCacheArgs& a, const KvCachePlan& p);

// The caches' strides as the forward's TMA maps take them: every dim of more than one element but the
// last needs a positive stride of a multiple of 16 bytes, dim 0 counted over every row or page where
// the forward addresses the cache itself (a page table, cache_batch_idx or cache_leftpad: check_forward's
// check of the (batch, capacity, h_kv, d) attention operand never sees that stride at batch 1), else
// over q's batch rows. Host only (no device); NotSupported naming the cache and the dim, before
// check_forward's message (which would advise a copy of a cache that is written in place).
Status check_cuda_cache_strides(const KvCacheArgs& a);

}  // namespace fastattn::detail
