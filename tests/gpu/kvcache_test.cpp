// forward_kvcache on the CUDA backend, contiguous cache, against the host model (kv_gpu_run.h):
// every cache_seqlens edge, s_new 0 and > 0, rotary both styles, odd lengths, and a CUDA-graph
// capture + replay of a decode step. Paged caches, cache_batch_idx, leftpad: kvcache_paged_test.cpp.
#include <gtest/gtest.h>

#include "kv_gpu_run.h"

namespace fastattn::gputest {
namespace {

using testing::KvSpec;

KvSpec decode() {
  KvSpec s;
  s.batch = 3;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = s.head_dim_v = 128;
  s.dtype = DType::BF16;
  s.seqlen_cache = 512;
  s.seqlens = {0, 1, 511};  // empty, one token, full after the append
  s.seqlen_new = 1;
  return s;
}

// decode() with chunks of 4 tokens appended (s_q 4, causal) to sequences of 0, 17 and 400 keys.
KvSpec chunk() {
  KvSpec s = decode();
  s.seqlens = {0, 17, 400};
  s.seqlen_new = s.seqlen_q = 4;
  s.causal = true;
  return s;
}

class KvCacheGpu : public HopperTest {};

TEST_F(KvCacheGpu, DecodeSeqlenEdges) {
  KvSpec s = decode();
  check_gpu_kvcache(s);
  s.causal = true;
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, NoNewTokens) {
  KvSpec s = decode();
  s.seqlen_new = 0;
  s.seqlens = {0, 200, 512};
  check_gpu_kvcache(s);
  s.pass_new = false;
  s.seqlens = {};
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, AppendWithRotary) {
  KvSpec s = chunk();
  s.rotary_dim = 64;
  check_gpu_kvcache(s);  // interleaved, causal: q rows advance
  s.interleaved = false;
  s.causal = false;
  s.seqlen_q = 3;
  s.dtype = DType::F16;
  check_gpu_kvcache(s);  // GPT-NeoX pairs, every q row at position n
  s.rotary_dim = 128;
  s.window_left = 33;
  s.window_right = 0;
  check_gpu_kvcache(s);  // full-width rotary, local window
}

TEST_F(KvCacheGpu, OddLengthsAndCacheRows) {
  KvSpec s = decode();
  s.batch = 2;
  s.cache_batch = 5;  // rows past the batch stay untouched
  s.seqlen_cache = 4097;
  s.seqlens = {113, 4000};
  s.seqlen_new = 17;
  s.seqlen_q = 17;
  s.rotary_dim = 32;
  s.causal = true;
  s.softcap = 20.0f;
  check_gpu_kvcache(s);
}

TEST_F(KvCacheGpu, GraphCaptureAndReplay) {
  KvSpec s = decode();
  s.rotary_dim = 64;
  s.causal = true;
  check_gpu_kvcache(s, /*graph=*/true);
}

// Split-KV through forward_kvcache (device seqused_k from the append kernel): the heuristic and
// forced counts, more splits than key blocks, sequences with no key, and a captured decode step.
TEST_F(KvCacheGpu, DecodeWithSplits) {
  KvSpec s = decode();
  s.heads_q = 32;
  s.heads_kv = 8;
  s.seqlen_cache = 4097;
  s.seqlens = {0, 1, 4000};
  for (int splits : {0, 5, 64}) {
    s.num_splits = splits;
    check_gpu_kvcache(s);
  }
  s.num_splits = 3;
  s.seqlen_q = s.seqlen_new = 4;
  s.causal = true;
  check_gpu_kvcache(s);
  s.seqlen_q = s.seqlen_new = 1;
  s.causal = false;
  s.num_splits = 0;
  check_gpu_kvcache(s, /*graph=*/true);
}

// NaN in every cache position outside a sequence's keys (an uninitialised cache, KvSpec::nan_past_keys): FA2
// reads none of them; FA3 loaded them by TMA and 0 * NaN reached out (its issues #1745 / #2374). Unsplit and
// split, left padding, and paged (a page that ends inside the last key block).
TEST_F(KvCacheGpu, NanPastTheKeys) {
  KvSpec s = chunk();
  s.nan_past_keys = true;
  for (int splits : {1, 0, 3}) {
    s.num_splits = splits;
    check_gpu_kvcache(s);
  }
  s.leftpad = {0, 5, 100};
  s.num_splits = 1;
  check_gpu_kvcache(s);
  s.leftpad.clear();
  s.num_splits = 3;
  check_paged_equals_contiguous(s, {16, 64});
  // d 64 (three consumer warpgroups, 192-key blocks) and d 256 (no ping-pong: both warpgroups zero the rows
  // unordered), a prefill of 113 rows into the cache (several q tiles see the last key block).
  for (int d : {64, 256}) {
    s.head_dim = s.head_dim_v = d;
    s.seqlens = {3, 200, 300};
    s.seqlen_new = s.seqlen_q = 113;
    for (int splits : {1, 0}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
  }
}

// ALiBi over the cache (KvCacheArgs::alibi_slopes): the sm90 bias kernels reading the cache, unsplit; refused by
// name with num_splits > 1 (the bias kernels have no split twin). Decode edges, per-batch slopes with append + rotary, left padding, and
// paged bitwise equal to contiguous.
TEST_F(KvCacheGpu, AlibiOverTheCache) {
  KvSpec s = decode();
  s.alibi = 1;
  check_gpu_kvcache(s);
  s = chunk();
  s.alibi = 2;
  s.rotary_dim = 64;
  check_gpu_kvcache(s);
  s.leftpad = {0, 5, 100};
  check_gpu_kvcache(s);
  s.leftpad.clear();
  s.num_splits = 1;
  check_paged_equals_contiguous(s, {16, 64});
  s.num_splits = 3;
  expect_kvcache_refused(s, "num_splits: ");
}

// d_qk 192 with d_v 128: k_new / v_new of their own widths appended, rotary on q and k, unsplit
// (s_q 4, causal) and split decode at the heuristic's count.
TEST_F(KvCacheGpu, NarrowV192x128) {
  KvSpec s = chunk();
  s.head_dim = 192;
  s.head_dim_v = 128;
  s.rotary_dim = 64;
  check_gpu_kvcache(s);
  s.heads_q = 32;
  s.heads_kv = 8;
  s.seqlen_cache = 4097;
  s.seqlens = {0, 1, 4000};
  s.seqlen_new = s.seqlen_q = 1;
  s.causal = false;
  s.num_splits = 0;
  check_gpu_kvcache(s);
}

}  // namespace
}  // namespace fastattn::gputest
