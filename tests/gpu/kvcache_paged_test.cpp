// forward_kvcache on the CUDA backend reading the cache where it lies: paged caches (page sizes
// 16 to 256, pages shuffled in a pool larger than the sequences need), cache_batch_idx
// permutations and left padding. Each against the host model (kv_gpu_run.h); a paged call must
// also give the bits of the same call on the contiguous cache: out, lse and the appended tokens.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "kv_gpu_run.h"

namespace fastattn::gputest {
namespace {

using testing::KvCase;
using testing::KvSpec;

// Capacity 4352 = 17 pages of 256 (every page size tested divides it); cache_seqlens 0, 1, odd
// (17, 113, 4097) and full after the append.
KvSpec long_decode(int seqlen_new = 1) {
  KvSpec s;
  s.batch = 6;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = s.head_dim_v = 128;
  s.dtype = DType::BF16;
  s.seqlen_cache = 4352;
  s.seqlens = {0, 1, 17, 113, 4097, 4352 - seqlen_new};
  s.seqlen_q = s.seqlen_new = seqlen_new;
  return s;
}

class KvCachePagedGpu : public HopperTest {};

TEST_F(KvCachePagedGpu, DecodeEveryPageSize) {
  check_paged_equals_contiguous(long_decode(), {16, 64, 128, 256});  // GQA 4 (packed heads)
  KvSpec s = long_decode();  // page sizes that are not powers of two: a page ends inside a block
  s.seqlen_cache = 4800;
  s.seqlens = {0, 1, 17, 113, 4097, 4799};
  check_paged_equals_contiguous(s, {48, 80, 240});
}

// Split calls at d 128 over pages of half a key block (64, 192: gcd with 128 is 64) take the
// key-half kernel (K/V tiles by page half, one TMA copy a page, QK as two 64-key wgmmas): the
// bits of the contiguous cache's split kernel at the same split count, every split count,
// including splits that see no keys (1 and 17 keys across 5 splits) and a page ending in a block.
TEST_F(KvCachePagedGpu, KeyHalfLayoutSplitDecode) {
  KvSpec s = long_decode();
  s.batch = 4;
  s.seqlen_cache = 4800;  // 75 pages of 64, 25 of 192
  s.seqlens = {1, 17, 4097, 4799};
  for (int splits : {2, 5, 8}) {
    s.num_splits = splits;
    check_paged_equals_contiguous(s, {64, 192});
  }
  s.num_splits = 0;  // the heuristic's count, GQA 8 and a causal append of 4
  s.heads_q = 16;
  s.seqlen_q = s.seqlen_new = 4;
  s.seqlens = {0, 113, 2000, 4796};
  s.causal = true;
  check_paged_equals_contiguous(s, {64});
}

TEST_F(KvCachePagedGpu, AppendRotaryCausal) {
  KvSpec s = long_decode(4);
  s.heads_kv = 8;  // GQA 1
  s.rotary_dim = 64;
  s.causal = true;
  check_paged_equals_contiguous(s, {16, 64});
}

TEST_F(KvCachePagedGpu, LocalWindowsAndSoftcap) {
  KvSpec s = long_decode(17);
  s.heads_kv = 1;  // GQA 8
  s.dtype = DType::F16;
  s.rotary_dim = 32;
  s.interleaved = false;
  s.softcap = 30.0f;
  s.window_left = 33;  // narrow: the 64-key config
  s.window_right = 0;
  check_paged_equals_contiguous(s, {16, 256});
  s.window_left = 700;  // the default 128-key config, a window edge inside a page
  s.window_right = 3;
  check_paged_equals_contiguous(s, {64, 128});
}

// The other key-block sizes: d 64 (128-key blocks, three consumer warpgroups: boxes of
// gcd(page, 128); pages 128 and 256 take the page fetched a block ahead) and d 256 (80-key blocks:
// boxes of 16 for every page size but 80's multiples).
TEST_F(KvCachePagedGpu, OtherHeadDims) {
  KvSpec s = long_decode(4);
  s.batch = 3;
  s.seqlens = {1, 113, 4097};
  s.head_dim = s.head_dim_v = 64;
  s.causal = true;
  check_paged_equals_contiguous(s, {16, 64, 256});
  s.seqlen_q = 1;  // GQA 4 packed
  check_paged_equals_contiguous(s, {128});
  s = long_decode(4);
  s.batch = 3;
  s.seqlens = {0, 17, 4097};
  s.head_dim = s.head_dim_v = 256;
  s.rotary_dim = 64;
  check_paged_equals_contiguous(s, {16, 256});
  s.head_dim = 192;  // d_v < d: V's pages narrower than K's
  s.head_dim_v = 128;
  check_paged_equals_contiguous(s, {16, 64});
}

TEST_F(KvCachePagedGpu, GraphCaptureAndReplay) {
  KvSpec s = long_decode();
  s.rotary_dim = 64;
  s.causal = true;
  check_paged_equals_contiguous(s, {64}, /*graph=*/true);
}

// Out-of-range pages are an error before anything is written when the index arrays are checked.
TEST_F(KvCachePagedGpu, BadPageIsAnError) {
  testing::Rng rng(testing::test_seed());
  KvSpec s = long_decode();
  s.seqlen_cache = 256;
  s.seqlens = {0, 1, 17, 113, 200, 255};
  s.page_size = 64;
  KvCase c = testing::make_kv_case(s, rng);
  c.page_table[size_t(4 * c.pages_per_seq() + 3)] = int32_t(c.k_cache.view().shape[0]);
  DeviceKv d;
  const KvCacheArgs a = device_args(c, d);
  const std::vector<double> before = c.k_cache.to_f64();
  const Status st = forward_kvcache(a);
  EXPECT_EQ(int(st.code), int(Code::InvalidArgument)) << st.message;
  EXPECT_NE(st.message.find("page_table: entry (4, 3)"), std::string::npos) << st.message;
  FA_CUDA_OK(cudaDeviceSynchronize());
  d.get(a.k_cache, c.k_cache);
  d.get(a.out, c.out);
  EXPECT_EQ(c.k_cache.to_f64(), before) << "the cache was written";
  EXPECT_EQ(c.out.count_nan(), c.out.numel()) << "out was written";
}

TEST_F(KvCachePagedGpu, CacheBatchIdxPermutation) {
  KvSpec s = long_decode();
  s.batch = 4;
  s.cache_batch = 7;  // rows no sequence names stay untouched
  s.batch_idx = {6, 2, 0, 5};
  s.seqlens = {0, 17, 113, 4097};
  check_gpu_kvcache(s);
  s = long_decode(4);
  s.batch = 5;
  s.batch_idx = {4, 3, 2, 1, 0};
  s.seqlens = {1, 17, 113, 4097, 4348};
  s.rotary_dim = 64;
  s.causal = true;
  check_gpu_kvcache(s);
}

TEST_F(KvCachePagedGpu, LeftPadding) {
  KvSpec s = long_decode(4);
  s.batch = 4;
  s.seqlens = {5, 17, 113, 4097};
  s.leftpad = {5, 1, 100, 4000};  // the first sequence's keys are only the new ones
  s.rotary_dim = 64;
  s.causal = true;
  check_gpu_kvcache(s);
  s.causal = false;
  s.window_left = 50;
  s.window_right = 0;
  s.seqlen_q = 17;
  s.seqlen_new = 17;
  s.seqlens = {0, 17, 113, 4097};
  s.leftpad = {0, 17, 3, 2049};
  check_gpu_kvcache(s);
}

TEST_F(KvCachePagedGpu, LeftPaddingWithRowsUnderGraph) {
  KvSpec s = long_decode();
  s.batch = 3;
  s.cache_batch = 4;
  s.batch_idx = {3, 1, 0};
  s.seqlens = {1, 113, 4097};
  s.leftpad = {1, 16, 17};
  s.rotary_dim = 128;
  s.causal = true;
  check_gpu_kvcache(s, /*graph=*/true);
}

// At batch 1 the attention operand's dim 0 is q's batch (one element), so only the cache's own rule
// (kvcache_cuda.cpp, check_cuda_cache_strides) sees the stride of the pages or rows the TMA maps span:
// pages aliased (stride 0) or a reversed pool (negative stride) are refused before anything is written
// (the maps would read them 16 bytes apart); an aliased cache with an append is refused earlier on every
// backend (kvcache_validate.cpp: slots would share memory).
TEST_F(KvCachePagedGpu, CacheRowStridesAtBatchOne) {
  for (bool paged : {true, false}) {
    for (bool reversed : {false, true}) {
      SCOPED_TRACE(std::string(paged ? "paged" : "cache_batch_idx") + (reversed ? ", reversed" : ", aliased"));
      testing::Rng rng(testing::test_seed());
      KvSpec s = long_decode();
      s.batch = 1;
      s.seqlen_cache = 256;
      s.seqlens = {113};
      if (paged) {
        s.page_size = 64;
      } else {
        s.cache_batch = 3;
        s.batch_idx = {2};
      }
      KvCase c = testing::make_kv_case(s, rng);
      DeviceKv d;
      KvCacheArgs a = device_args(c, d);
      const std::vector<double> before = c.k_cache.to_f64();
      const Tensor stored = a.k_cache;  // the device buffer as uploaded
      Tensor& cache = a.k_cache;
      ASSERT_GT(cache.shape[0], 1);
      if (reversed) {  // the view's first row is the storage's last
        cache.data = static_cast<char*>(cache.data) + (cache.shape[0] - 1) * cache.stride[0] * dtype_size(cache.dtype);
        cache.stride[0] = -cache.stride[0];
      } else {
        cache.stride[0] = 0;
      }
      // An aliased cache cannot take an append on any backend (InvalidArgument, before the CUDA rule); without
      // one the CUDA rule refuses it (the maps would read its rows 16 bytes apart).
      const Status st = forward_kvcache(a);
      EXPECT_EQ(int(st.code), int(reversed ? Code::NotSupported : Code::InvalidArgument)) << st.message;
      EXPECT_EQ(st.message.rfind("k_cache: dim 0 has stride", 0), 0u) << st.message;
      if (!reversed) {
        KvCacheArgs read_only = a;
        read_only.k_new = read_only.v_new = read_only.rotary_cos = read_only.rotary_sin = Tensor{};
        const Status ro = forward_kvcache(read_only);
        EXPECT_EQ(int(ro.code), int(Code::NotSupported)) << ro.message;
        EXPECT_EQ(ro.message.rfind("k_cache: dim 0 has stride", 0), 0u) << ro.message;
      }
      FA_CUDA_OK(cudaDeviceSynchronize());
      d.get(stored, c.k_cache);
      d.get(a.out, c.out);
      EXPECT_EQ(c.k_cache.to_f64(), before) << "the cache was written";
      EXPECT_EQ(c.out.count_nan(), c.out.numel()) << "out was written";
    }
  }
}

}  // namespace
}  // namespace fastattn::gputest
