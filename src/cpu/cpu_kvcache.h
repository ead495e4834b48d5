// The host side of forward_kvcache: the cache append (with the rotary embedding), q's rotation,
// and the gather of each sequence's keys out of a contiguous or paged cache.
#pragma once

#include "api/kvcache_plan.h"
#include "fastattn/kvcache.h"

namespace fastattn::cpu {

// Writes k_new (rotated when rotary is on) and v_new into the cache at positions
// cache_seqlens[b] + i. Duplicate cache rows (cache_batch_idx): the later sequence wins.
void kvcache_append(const detail::KvCachePlan& p, const KvCacheArgs& a);

// q rotated at its positions into `dst`, contiguous (b, s_q, h_q, d) in q's dtype.
void kvcache_rotate_q(const detail::KvCachePlan& p, const KvCacheArgs& a, void* dst);

// Sequence b's keys and values, cache positions [first_key, cached + s_new), bit for bit into
// contiguous (b, max_keys, h_kv, d | d_v) buffers of the cache's dtype (rows past a sequence's
// keys are left as they are).
void kvcache_gather(const detail::KvCachePlan& p, const KvCacheArgs& a, int64_t max_keys, void* k_dst,
                    void* v_dst);

}  // namespace fastattn::cpu
