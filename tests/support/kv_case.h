// One forward_kvcache test problem on the host, and its expected results from a straightforward
// model written independently of the library: the cache after the append (rotary in float64,
// rounded to the dtype), and the attention over each sequence's keys through the float64 oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastattn/kvcache.h"
#include "reference/reference.h"
#include "support/host_tensor.h"
#include "support/test_rng.h"

namespace fastattn::testing {

struct KvSpec {
  int batch = 2, seqlen_q = 1, heads_q = 4, heads_kv = 2, head_dim = 32, head_dim_v = 32;
  DType dtype = DType::F32;
  int cache_batch = 0;           // contiguous cache rows (0: batch)
  int seqlen_cache = 64;         // contiguous: positions per row; paged: pages_per_seq * page_size
  int page_size = 0;             // > 0: paged cache with seqlen_cache / page_size pages per sequence
  std::vector<int> seqlens;      // cache_seqlens (empty: absent, the whole cache)
  int seqlen_new = 0;
  bool pass_new = true;          // pass k_new/v_new (also with seqlen_new 0); needs seqlens
  std::vector<int> batch_idx, leftpad;
  int rotary_dim = 0;
  bool interleaved = true;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  int num_splits = 0;
  // Every cache position of a sequence outside its keys after the call ([0, leftpad) and [cached + s_new,
  // capacity)) holds NaN, as an uninitialised cache (torch.empty) may: FlashAttention 2 reads none of them
  // (FA3's issues #1745 / #2374: its TMA loads carried them into P V).
  bool nan_past_keys = false;
  // ALiBi slopes (KvCacheArgs::alibi_slopes), uniform in [0.01, 1): 0 none, 1 one a q head, 2 one a
  // (batch entry, q head).
  int alibi = 0;
  std::string describe() const;
  // Causal or a window: query row i is rotated at cache_seqlens + i, else every row at cache_seqlens.
  bool q_rows_advance() const { return causal || window_left >= 0 || window_right >= 0; }
};

struct KvCase {
  KvSpec spec;
  HostTensor q, k_cache, v_cache, k_new, v_new, cos, sin, out, lse;
  HostTensor slopes;  // fp32 (heads_q) or (batch, heads_q) when spec.alibi
  std::vector<int32_t> seqlens, batch_idx, leftpad, page_table;
  // Paged: page_table[b * pages_per_seq + i] is sequence b's i-th page (a random permutation).
  int pages_per_seq() const;

  KvCacheArgs args(Backend backend = Backend::CPU) const;
  // The cache position (row, slot) of sequence b's position `pos`.
  std::pair<int64_t, int64_t> slot(int b, int64_t pos) const;
  // Sequence b's cached tokens before the call, its first key, its key count after the append.
  int cached(int b) const;
  int first_key(int b) const;
  int keys(int b) const { return cached(b) + spec.seqlen_new - first_key(b); }
};

KvCase make_kv_case(const KvSpec& spec, Rng& rng);

// The same problem with the cache laid out in pages of `page_size` (random page order); the
// logical contents of every sequence are those of `c`.
KvCase to_paged(const KvCase& c, int page_size, Rng& rng);

// The row-major flat index of element (i0, i1, i2, i3) of a contiguous 4-D tensor (a HostTensor's view).
int64_t flat4(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

struct KvExpected {
  std::vector<double> k_cache, v_cache;  // logical row-major, after the append
  std::vector<bool> k_rotated;           // elements written by a rotation (allowed 1 ulp)
  reference::ForwardF64 attn;            // out (b, s_q, h_q, d_v), lse (b, h_q, s_q)
};

// `opt` as the float64 oracle takes it (round_p_to_input_dtype gives a GPU kernel's baseline).
KvExpected expected_kvcache(const KvCase& c, const reference::Options& opt = {});

}  // namespace fastattn::testing
