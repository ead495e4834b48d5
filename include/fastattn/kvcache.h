// Attention against a KV cache, with FlashAttention's flash_attn_with_kvcache semantics.
//
//   fastattn::KvCacheArgs a;
//   a.q = q; a.k_cache = kc; a.v_cache = vc; a.out = out;
//   a.cache_seqlens = {seqlens, batch};         // tokens already in the cache
//   a.k_new = k; a.v_new = v;                   // optional: appended at cache_seqlens first
//   a.causal = true;
//   fastattn::Status st = fastattn::forward_kvcache(a, stream);
//
// For sequence b (cache row c = cache_batch_idx[b], or b) with n = cache_seqlens[b] tokens
// cached, s_new new tokens and left padding p = cache_leftpad[b] (0 when absent):
//   1. k_new[b, i] (rotated, see below) and v_new[b, i] are written into the cache at position
//      n + i, i < s_new: the cache is updated in place.
//   2. Attention of q[b] over the cache positions [p, n + s_new) of row c, as fastattn::forward
//      with seqlen_k = n + s_new - p: causal and local windows are bottom-right aligned in those
//      coordinates (the last query row sits at the last key).
// Rotary embedding (rotary_cos/sin given, rotary_dim = 2 * cos.shape[1] leading dims of each
// head rotated, the rest untouched): new key i takes position n + i; query row i takes position
// n + i when causal or local, else n for every row (all queries sit at position n). Interleaved
// rotates pairs (0, 1), (2, 3), ...; otherwise pairs (j, j + rotary_dim / 2) (GPT-NeoX). The
// rotation is computed in fp32 and rounded to the dtype, as FlashAttention does. The table needs a
// row for every position it is read at: s_ro >= capacity, and with causal or local and
// s_q > s_new, s_ro >= capacity + s_q - s_new (query rows past the new keys sit past the capacity).
// The cache is written in place: with k_new, no cache dim of more than one element may have stride 0.
// Paged cache: sequence b's position t lives in page page_table[b, t / page_size], row
// t % page_size, of k_cache/v_cache shaped (num_pages, page_size, h_kv, d).
// Sequences may share cache rows or pages (cache_batch_idx, page_table), but a slot that one
// sequence appends to belongs to it, at one position: no other sequence may append to it or read it,
// and a page listed twice in one sequence's row may not take its append (InvalidArgument where the
// index arrays are read on the host; FlashAttention leaves all of these undefined).
// On the CUDA backend the caches are read by TMA: every dim of more than one element but the last
// needs a positive stride of a multiple of 16 bytes, dim 0 (pages, cache rows) included where the
// cache is addressed in place (page_table, cache_batch_idx, cache_leftpad), whatever the batch.
#pragma once

#include <cstddef>

#include "fastattn/types.h"

namespace fastattn {

// A (batch, pages_per_seq) row-major int32 table of page indices, living where q lives.
struct PageTable {
  const int32_t* data = nullptr;
  int64_t batch = 0;
  int64_t pages_per_seq = 0;
  bool defined() const { return data != nullptr; }
};

struct KvCacheArgs {
  Tensor q;                 // (b, s_q, h_q, d)
  Tensor k_cache, v_cache;  // (b_cache, s_cache, h_kv, d | d_v), or paged (num_pages, page_size, h_kv, d | d_v)
  Tensor k_new, v_new;      // optional, both or neither: (b, s_new, h_kv, d | d_v)
  Tensor out;               // (b, s_q, h_q, d_v)
  Tensor lse;               // optional: (b, h_q, s_q) float32

  IndexArray cache_seqlens;    // (b,) tokens in the cache; absent: the whole cache (needs no k_new)
  IndexArray cache_batch_idx;  // (b,) cache row of each sequence (contiguous cache); absent: b
  IndexArray cache_leftpad;    // (b,) first used cache position of each sequence; absent: 0
  PageTable page_table;        // paged cache when defined; page_size must be a multiple of 16

  Tensor rotary_cos, rotary_sin;  // optional, both or neither: (s_ro, rotary_dim / 2), q's dtype
  bool rotary_interleaved = true;
  // Optional ALiBi (AttnArgs::alibi_slopes: fp32 (heads_q) or (batch, heads_q), on q's device): the term
  // -slope |i + s_k - s_q - j| with s_k the sequence's keys after the append (from cache_leftpad on) and j
  // counted from cache_leftpad, as FlashAttention's flash_attn_with_kvcache.
  Tensor alibi_slopes;

  float softmax_scale = std::numeric_limits<float>::quiet_NaN();  // NaN -> 1/sqrt(d)
  bool causal = false;
  int32_t window_left = -1;
  int32_t window_right = -1;
  float softcap = 0.0f;
  // Splits of the keys (split-KV): 0 = chosen from the problem and the machine, 1 = no split,
  // n > 1 = n splits whose partial results are combined (at most 1024). The result does not depend on
  // it beyond rounding.
  int32_t num_splits = 0;

  // CUDA: scratch for the rotated q and the per-sequence key counts, at least
  // kvcache_workspace_bytes(args) bytes, 16-byte aligned, on q's device. Null: allocated and
  // freed on the stream (cudaMallocAsync; also capturable).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // CUDA: copy cache_seqlens, cache_batch_idx, cache_leftpad and the page table to the host to
  // check them (one sync). Turn off under CUDA graphs; the caller then vouches for them.
  bool check_index_arrays = true;

  Backend backend = Backend::Auto;
  int32_t num_threads = 0;  // CPU backend: 0 = all hardware threads
};

// Every rule of forward_kvcache, without touching the cache or any output.
FASTATTN_API Status validate_kvcache(const KvCacheArgs& args);

// Appends k_new/v_new into the cache (when given), then writes out (and lse when defined).
FASTATTN_API Status forward_kvcache(const KvCacheArgs& args, void* stream = nullptr);

// Workspace forward_kvcache needs on the CUDA backend for these args (0 on the host backends).
FASTATTN_API size_t kvcache_workspace_bytes(const KvCacheArgs& args);

}  // namespace fastattn
