// forward_kvcache at split-D head dims (MLA-style decode: h_q 128 over one KV head, d_qk 576 /
// d_v 512) on a contiguous cache against the host model (kv_gpu_run.h: the cache after the append
// bit for bit, out and lse against the float64 oracle with FA3's rule): cache_seqlens 0 / 1 / 17 /
// 4000 (full after the append), k_new / v_new of their own widths, split counts 1 / 5 / the
// heuristic's, a causal append of 4, a graph replay; and the cache layouts it refuses by name
// before anything is written (pages, cache_batch_idx, leftpad, rotary).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv_gpu_run.h"
#include "scoped_env.h"

namespace fastattn::gputest {
namespace {

using testing::KvCase;
using testing::KvSpec;

class KvCacheSplitDGpu : public HopperTest {};

KvSpec mla_decode() {
  KvSpec s;
  s.batch = 4;
  s.heads_q = 128;
  s.heads_kv = 1;
  s.head_dim = 576;
  s.head_dim_v = 512;
  s.dtype = DType::BF16;
  s.seqlen_cache = 4097;
  s.seqlens = {0, 1, 17, 4096};  // empty, one token, odd, full after the append
  s.seqlen_new = 1;
  return s;
}

TEST_F(KvCacheSplitDGpu, MlaDecodeAppend) {
  KvSpec s = mla_decode();
  for (int splits : {1, 5, 0}) {
    s.num_splits = splits;
    check_gpu_kvcache(s);
  }
  s.seqlen_q = s.seqlen_new = 4;  // a causal append of 4 (packed rows of 4)
  s.seqlens = {0, 3, 113, 4093};
  s.causal = true;
  check_gpu_kvcache(s);
  s.seqlen_q = s.seqlen_new = 1;
  s.causal = false;
  s.num_splits = 0;
  check_gpu_kvcache(s, /*graph=*/true);
}

TEST_F(KvCacheSplitDGpu, NoNewTokensGqa16At512) {
  KvSpec s = mla_decode();
  s.heads_q = 16;
  s.head_dim = s.head_dim_v = 512;
  s.seqlen_new = 0;
  s.pass_new = false;
  s.seqlens = {1, 17, 2000, 4097};
  s.num_splits = 0;
  check_gpu_kvcache(s);
}

// NaN in every cache position outside the keys (an uninitialised cache): the last key block's V rows past
// them reach no output (splitd_hand_over_v zeroes them in smem), unsplit, split 5 and the heuristic's. Keys
// after the append 2, 18, 4001 (the last block's half 0 partial, half 1 wholly past) and 101 (half 1
// partial); then a causal append of 4 (keys 4, 7, 117, 4094); then d 1024.
TEST_F(KvCacheSplitDGpu, NanPastTheKeys) {
  KvSpec s = mla_decode();
  s.nan_past_keys = true;
  s.seqlens = {1, 17, 100, 4000};
  for (int splits : {1, 5, 0}) {
    s.num_splits = splits;
    check_gpu_kvcache(s);
  }
  s.seqlen_q = s.seqlen_new = 4;
  s.seqlens = {0, 3, 113, 4090};
  s.causal = true;
  s.num_splits = 0;
  check_gpu_kvcache(s);
  // d_qk 1024: the ring's 10 slots take the block's 16 V chunks, so a slot lands two zeroed chunks (keys
  // 2, 18, 101 in the last block; 4001 behind a block ahead), in both schedules (the rule's and the other).
  s = mla_decode();
  s.nan_past_keys = true;
  s.heads_q = 16;
  s.head_dim = s.head_dim_v = 1024;
  s.seqlens = {1, 17, 100, 4000};
  for (const char* lockstep : {"0", "1"}) {
    ScopedEnv schedule("FASTATTN_SPLITD_LOCKSTEP", lockstep);
    SCOPED_TRACE(std::string("FASTATTN_SPLITD_LOCKSTEP=") + lockstep);
    for (int splits : {1, 0}) {
      s.num_splits = splits;
      check_gpu_kvcache(s);
    }
  }
}

// Refused by name, the cache and out untouched.
TEST_F(KvCacheSplitDGpu, RefusesPagesRowsLeftpadRotary) {
  struct Refusal {
    const char* what;
    void (*set)(KvSpec&);
  };
  const Refusal refusals[] = {
      {"page_table", [](KvSpec& s) { s.page_size = 64; }},
      {"cache_batch_idx", [](KvSpec& s) { s.batch_idx = {3, 2, 1, 0}; }},
      {"cache_leftpad", [](KvSpec& s) { s.leftpad = {0, 0, 5, 0}; }},
      {"rotary_cos", [](KvSpec& s) { s.rotary_dim = 64; }},
  };
  for (const Refusal& r : refusals) {
    testing::Rng rng(testing::test_seed());
    KvSpec s = mla_decode();
    s.seqlen_cache = 256;
    s.seqlens = {0, 1, 17, 200};
    r.set(s);
    KvCase c = testing::make_kv_case(s, rng);
    DeviceKv d;
    const KvCacheArgs a = device_args(c, d);
    const std::vector<double> before = c.k_cache.to_f64();
    const Status st = forward_kvcache(a);
    EXPECT_EQ(int(st.code), int(Code::NotSupported)) << r.what << ": " << st.message;
    EXPECT_EQ(st.message.rfind(r.what, 0), 0u) << st.message;
    FA_CUDA_OK(cudaDeviceSynchronize());
    d.get(a.k_cache, c.k_cache);
    d.get(a.out, c.out);
    EXPECT_EQ(c.k_cache.to_f64(), before) << r.what << ": the cache was written";
    EXPECT_EQ(c.out.count_nan(), c.out.numel()) << r.what << ": out was written";
  }
}

}  // namespace
}  // namespace fastattn::gputest
