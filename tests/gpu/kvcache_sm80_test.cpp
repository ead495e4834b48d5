// forward_kvcache and split-KV on the sm80 (Ampere / Ada) path, forced on any GPU of major >= 8 (an H100 /
// H200 runs the compute_80 PTX: cuda_backend::set_forced_arch_major): the decode kernel (sm80/fwd/kernel.cuh,
// kDecode) against the host model (kv_gpu_run.h) at every built (dtype, d): cache_seqlens edges (0, 1, full),
// forced and heuristic split counts (more splits than key blocks: splits that see no key), append + rotary
// at odd lengths over a cache with spare rows, cache_batch_idx permutations, left padding, local windows and
// softcap; paged caches (page sizes 16 to 256, 48 and 80, shuffled pages) bitwise equal to the contiguous
// cache at the same split count, and CUDA-graph capture + replay.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "kv_gpu_run.h"
#include "sm80_fixture.h"

namespace fastattn::gputest {
namespace {

using testing::KvSpec;

bool built(DType dt, int d) { return sm80_built(cuda_backend::KernelFamily::Forward, dt, d); }

class KvCacheSm80 : public Sm80PathTest<cuda_backend::KernelFamily::Forward> {};

// f(spec) at every built (dtype, d) of the sm80 menu (the long paged cases: one dtype, the first built of
// bf16, fp16), the spec's other fields from `base`.
template <class F>
void for_built(const KvSpec& base, F&& f, bool every_dtype = true) {
  int n = 0;
  const bool bf16 = built(DType::BF16, 64) || built(DType::BF16, 128);
  for (DType dt : {DType::BF16, DType::F16}) {
    if (!every_dtype && (dt == DType::BF16) != bf16) continue;
    for (int d : {64, 128})
      if (built(dt, d)) {
        ++n;
        KvSpec s = base;
        s.dtype = dt;
        s.head_dim = s.head_dim_v = d;
        SCOPED_TRACE(std::string(dt == DType::BF16 ? "bf16" : "fp16") + " d" + std::to_string(d));
        f(s);
      }
  }
  ASSERT_GT(n, 0) << "no sm80 forward is built";
}

KvSpec decode() {
  KvSpec s;
  s.batch = 3;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.seqlen_cache = 512;
  s.seqlens = {0, 1, 511};  // empty, one token, full after the append
  s.seqlen_new = 1;
  return s;
}

// Capacity 4352 = 17 pages of 256 (every page size tested divides it); cache_seqlens 0, 1, odd and full.
KvSpec long_decode(int seqlen_new = 1) {
  KvSpec s;
  s.batch = 6;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.seqlen_cache = 4352;
  s.seqlens = {0, 1, 17, 113, 4097, 4352 - seqlen_new};
  s.seqlen_q = s.seqlen_new = seqlen_new;
  return s;
}

TEST_F(KvCacheSm80, DecodeSeqlenEdgesAndSplits) {
  for_built(decode(), [](KvSpec s) {
    for (int splits : {1, 0, 3, 64}) {  // 64: more splits than key blocks
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
    s.causal = true;
    s.num_splits = 0;
    check_gpu_kvcache(s);
    s.heads_q = 32;  // the decode shape the heuristic splits (few tiles, long keys)
    s.heads_kv = 8;
    s.seqlen_cache = 4097;
    s.seqlens = {0, 1, 4000};
    s.causal = false;
    check_gpu_kvcache(s);
    s.seqlen_q = s.seqlen_new = 300;  // a prefill into the cache: three m-blocks a head, each split
    s.heads_q = 8;
    s.heads_kv = 2;
    s.seqlens = {0, 1, 4097 - 300};
    s.causal = true;
    for (int splits : {3, 0}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
  });
}

TEST_F(KvCacheSm80, AppendRotaryOddLengths) {
  KvSpec base = decode();
  base.batch = 2;
  base.cache_batch = 5;  // rows past the batch stay untouched
  base.seqlen_cache = 4097;
  base.seqlens = {113, 4000};
  base.seqlen_new = base.seqlen_q = 17;
  base.rotary_dim = 32;
  base.causal = true;
  base.softcap = 20.0f;
  for_built(base, [](KvSpec s) {
    for (int splits : {1, 3}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
    s.interleaved = false;  // GPT-NeoX pairs, full-width rotary, local window
    s.rotary_dim = s.head_dim;
    s.softcap = 0.f;
    s.causal = false;
    s.window_left = 33;
    s.window_right = 0;
    s.num_splits = 2;
    check_gpu_kvcache(s);
  });
}

TEST_F(KvCacheSm80, CacheBatchIdxAndLeftPadding) {
  KvSpec base = long_decode(4);
  base.batch = 5;
  base.cache_batch = 7;  // rows no sequence names stay untouched
  base.batch_idx = {6, 2, 0, 5, 3};
  base.seqlens = {1, 17, 113, 4097, 4348};
  base.rotary_dim = 64;
  base.causal = true;
  for_built(base, [](KvSpec s) {
    for (int splits : {1, 0, 4}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
    s.batch_idx.clear();  // left padding: the first sequence's keys are only the new ones
    s.cache_batch = 0;
    s.batch = 4;
    s.seqlens = {5, 17, 113, 4097};
    s.leftpad = {5, 1, 100, 4000};
    for (int splits : {1, 3}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
    s.cache_batch = 6;  // both: rows permuted and left-padded, heuristic splits
    s.batch_idx = {5, 0, 3, 1};
    s.num_splits = 0;
    check_gpu_kvcache(s);
  });
}

// ALiBi over a cache is sm90's only (the sm80 forward has no bias path): refused by name, contiguous and
// paged, before anything is written.
TEST_F(KvCacheSm80, AlibiRefusedByName) {
  for_built(decode(), [](KvSpec s) {
    s.alibi = 1;
    expect_kvcache_refused(s, "alibi_slopes: ");
    s.seqlen_cache = 512;
    s.page_size = 64;
    expect_kvcache_refused(s, "alibi_slopes: ");
  }, /*every_dtype=*/false);
}

// A paged call gives the bits of the contiguous one at the same split count (both run the decode kernel:
// a contiguous cache read as is with num_splits 1 takes the plain kernel, whose key blocks are twice as long).
TEST_F(KvCacheSm80, PagedEqualsContiguous) {
  for_built(long_decode(), [](KvSpec s) {
    s.num_splits = 3;
    check_paged_equals_contiguous(s, {16, 64, 256});
    s.seqlen_cache = 4800;  // pages that are not powers of two: a page ends inside a key block
    s.seqlen_q = s.seqlen_new = 4;
    s.seqlens = {0, 1, 17, 113, 4097, 4800 - 4};
    s.rotary_dim = 64;
    s.causal = true;
    s.window_left = 50;
    s.window_right = 0;
    s.softcap = 20.0f;
    s.num_splits = 2;
    check_paged_equals_contiguous(s, {48, 80});
  }, /*every_dtype=*/false);
}

// NaN in every cache position outside a sequence's keys (an uninitialised cache): rows past the keys are
// zero-filled by the loads (the plain and the decode kernel), as FA2 does, so none reaches out.
TEST_F(KvCacheSm80, NanPastTheKeys) {
  KvSpec base = decode();
  base.nan_past_keys = true;
  base.seqlens = {0, 17, 400};
  base.seqlen_new = base.seqlen_q = 4;
  base.causal = true;
  for_built(base, [](KvSpec s) {
    for (int splits : {1, 3}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
    s.leftpad = {0, 5, 100};
    s.num_splits = 2;
    check_gpu_kvcache(s);
    s.leftpad.clear();
    check_paged_equals_contiguous(s, {16, 64});
  });
}

TEST_F(KvCacheSm80, GraphCaptureAndReplay) {
  KvSpec base = long_decode();
  base.rotary_dim = 64;
  base.causal = true;
  base.num_splits = 0;
  for_built(base, [](KvSpec s) {
    check_gpu_kvcache(s, /*graph=*/true);
    s.num_splits = 3;
    check_paged_equals_contiguous(s, {64}, /*graph=*/true);
  }, /*every_dtype=*/false);
}

}  // namespace
}  // namespace fastattn::gputest
