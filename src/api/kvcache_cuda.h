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

}  // namespace fastattn::detail
