// Split-KV on the CPU backend: num_splits parts of each sequence's keys, merged, against the
// float64 reference (FA3's rule) and against the unsplit call; splits that see no key (more splits
// than key blocks, causal rows, local windows, empty sequences) carry no weight. The split-count
// heuristic on known shapes, and the CUDA launch's split plan (cuda/sched/split_plan.h).
#include <gtest/gtest.h>

#include <cmath>

#include "api/split_heuristic.h"
#include "cuda/sched/split_plan.h"
#include "cpu_cases.h"
#include "cpu_check.h"
#include "fastattn/fastattn.h"
#include "support/attn_case.h"

namespace fastattn::testing {
namespace {

CaseSpec with_splits(CaseSpec s, int splits) {
  s.num_splits = splits;
  return s;
}

std::vector<NamedCase> split_cases() {
  constexpr DType F32 = DType::F32, BF16 = DType::BF16;
  return {
      {"decode_gqa_3", with_splits(shape(2, 1, 1000, 8, 2, 64, 64, F32), 3)},
      {"decode_gqa_7_bf16", with_splits(shape(1, 1, 4097, 4, 1, 128, 128, BF16), 7)},
      {"more_splits_than_blocks", with_splits(shape(1, 4, 100, 2, 2, 32, 32, F32), 64)},
      {"causal_17x300", with_splits(causal(shape(2, 17, 300, 2, 1, 64, 48, F32)), 4)},
      {"local_window", with_splits(local(shape(1, 113, 500, 2, 2, 32, 32, F32), 20, 0), 5)},
      {"softcap", with_splits(softcap(shape(1, 3, 257, 2, 2, 64, 64, F32), 4.0f), 2)},
      {"varlen_empty_seqs", with_splits(varlen(shape(1, 0, 0, 2, 1, 32, 32, F32), {1, 0, 17, 4}, {300, 5, 0, 129}), 4)},
      {"padded_threads", with_splits(padded(shape(2, 5, 333, 4, 2, 32, 32, F32), 3), 3), 2},
  };
}

class SplitKv : public ::testing::TestWithParam<NamedCase> {};

TEST_P(SplitKv, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }

// The merged result is the unsplit one up to fp32 rounding of the merge.
TEST_P(SplitKv, MatchesUnsplit) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  AttnCase split = make_case(GetParam().spec, rng);
  AttnCase whole = split;
  whole.spec.num_splits = 1;
  ASSERT_TRUE(forward(split.args(Backend::CPU)).ok());
  ASSERT_TRUE(forward(whole.args(Backend::CPU)).ok());
  const std::vector<double> a = split.out.to_f64(), b = whole.out.to_f64();
  const std::vector<double> la = split.lse.to_f64(), lb = whole.lse.to_f64();
  const double tol = GetParam().spec.dtype == DType::F32 ? 1e-5 : 1.0 / 64;  // bf16: one rounding step
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0, std::fabs(b[i]))) << "out[" << i << "]; " << seed_note(seed);
  }
  for (size_t i = 0; i < la.size(); ++i) {
    if (std::isinf(lb[i])) {
      ASSERT_EQ(la[i], lb[i]) << "lse[" << i << "]";
    } else {
      ASSERT_NEAR(la[i], lb[i], 1e-5 * std::max(1.0, std::fabs(lb[i]))) << "lse[" << i << "]; " << seed_note(seed);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SplitKv, ::testing::ValuesIn(split_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

// NaN in k inside the used keys (docs/masks.md, "NaN"): every row that keeps such a key comes out NaN, out
// and lse, unsplit and split alike (a split used to be dropped by the merge, which gave the other splits'
// mix), every other row as the reference's; fixed length and varlen with seqused, causal and a window. The
// shapes make a NaN key always kept by some row and never by all (the check asks for both kinds).
TEST(SplitKv, NanInUsedKeysMakesTheirRowsNan) {
  constexpr DType F32 = DType::F32, BF16 = DType::BF16;
  const CaseSpec specs[] = {
      causal(shape(2, 113, 300, 4, 2, 64, 64, F32)),
      shape(1, 1, 4097, 8, 2, 128, 128, BF16),
      local(shape(2, 17, 100, 2, 2, 32, 32, F32), 90, 0),  // every key in some row's window
      // rows past seqused_q beside used keys (sequence 1): exactly 0 whatever the NaN key
      used(varlen(shape(1, 0, 0, 4, 1, 32, 32, BF16), {1, 9, 17, 4}, {300, 5, 40, 129}), {1, 5, 3, 4},
           {200, 5, 0, 100}),
  };
  for (const CaseSpec& base : specs) {
    for (int splits : {1, 3, 7}) {
      CaseSpec s = base;
      s.num_splits = splits;
      s.nan_keys = 1;  // one sequence and KV head: the other rows stay finite
      SCOPED_TRACE(s.describe());
      check_cpu_forward(s);
    }
  }
}

// NaN in v inside the used keys (docs/masks.md, "NaN"): the rows that keep no key (bottom-right causal with
// s_q > s_k: the first s_q - s_k rows of every head) come out exactly 0 with lse -inf, though their zero P rows
// met the NaN in their tile's P V; the row that keeps the NaN key last (the sequence's last) comes out NaN in the
// NaN's column with a finite lse. (Rows whose tile computes the key's block without keeping it may get NaN
// there too: 0 x NaN, as PyTorch's P V gives; not checked.)
TEST(SplitKv, NanInUsedValues) {
  const int b = 2, sq = 60, sk = 40, h = 4, d = 32;
  for (int splits : {1, 3}) {
    CaseSpec s = causal(shape(b, sq, sk, h, 2, d, d, DType::F32));
    s.num_splits = splits;
    s.nan_values = 1;
    SCOPED_TRACE(s.describe());
    Rng rng(test_seed());
    AttnCase c = make_case(s, rng);
    c.out.fill(777.0f);
    c.lse.fill(777.0f);
    ASSERT_TRUE(forward(c.args(Backend::CPU)).ok());
    const std::vector<double> out = c.out.to_f64(), lse = c.lse.to_f64();  // (b, s_q, h, d), (b, h, s_q)
    int64_t nonzero = 0, nan_last = 0;
    for (int bi = 0; bi < b; ++bi)
      for (int hi = 0; hi < h; ++hi) {
        for (int i = 0; i < sq - sk; ++i) {
          for (int e = 0; e < d; ++e) nonzero += out[size_t(((bi * sq + i) * h + hi) * d + e)] != 0.0;
          nonzero += lse[size_t((bi * h + hi) * sq + i)] != -INFINITY;
        }
        for (int e = 0; e < d; ++e) nan_last += std::isnan(out[size_t(((bi * sq + sq - 1) * h + hi) * d + e)]);
        EXPECT_TRUE(std::isfinite(lse[size_t((bi * h + hi) * sq + sq - 1)]));
      }
    EXPECT_EQ(nonzero, 0) << "rows that keep no key: out not exactly 0 or lse not -inf";
    EXPECT_EQ(nan_last, 2) << "the last row of the NaN's sequence, in the NaN's column, for the KV head's 2 q heads";
  }
}

TEST(SplitKv, OutOfRangeIsRejected) {
  Rng rng(test_seed());
  AttnCase c = make_case(with_splits(shape(1, 2, 3, 1, 1, 16, 16, DType::F32), -1), rng);
  const Status st = forward(c.args(Backend::CPU));
  EXPECT_EQ(int(st.code), int(Code::InvalidArgument));
  EXPECT_NE(st.message.find("num_splits: must be in [0, 1024]"), std::string::npos) << st.message;
  AttnCase big = make_case(with_splits(shape(1, 2, 3, 1, 1, 16, 16, DType::F32), 1025), rng);
  const Status sb = forward(big.args(Backend::CPU));
  EXPECT_EQ(int(sb.code), int(Code::InvalidArgument));
  EXPECT_NE(sb.message.find("num_splits: must be in [0, 1024]"), std::string::npos) << sb.message;
  AttnCase most = make_case(with_splits(shape(1, 2, 3, 1, 1, 16, 16, DType::F32), 1024), rng);
  EXPECT_TRUE(forward(most.args(Backend::CPU)).ok());
}

TEST(SplitHeuristic, KnownShapes) {
  using detail::choose_num_splits;
  // Decode b1, 8 KV heads (GQA packed: one tile each), 4096 keys in 32 blocks, 132 SMs: 16 splits
  // (128 CTAs, 97 % of one wave); 15 and 14 leave 3 blocks per split like 11..13 do.
  EXPECT_EQ(choose_num_splits({8, 32, 132}), 16);
  // The same at batch 8 (64 tiles): 2 splits fill 97 % of the wave; batch 14 (112 tiles): none.
  EXPECT_EQ(choose_num_splits({64, 32, 132}), 2);
  EXPECT_EQ(choose_num_splits({112, 32, 132}), 1);
  // Enough tiles to fill 80 % of the SMs: no split.
  EXPECT_EQ(choose_num_splits({106, 1000, 132}), 1);
  EXPECT_EQ(choose_num_splits({2000, 1000, 132}), 1);
  // One key block: nothing to split.
  EXPECT_EQ(choose_num_splits({1, 1, 132}), 1);
  // One tile, 1024 key blocks: as many splits as SMs allow at full efficiency.
  EXPECT_EQ(choose_num_splits({1, 1024, 132}), 114);
  // Streaming K/V (one tile per (batch, KV head), decode): about half the SMs' worth of CTAs (66 of
  // 132), at least 4 key blocks per split; the counts measured best on the H100 at batch 1/2/4/8.
  auto streaming = [](int64_t tiles, int64_t blocks) {
    detail::SplitShape s{tiles, blocks, 132};
    s.streams_kv = true;
    return choose_num_splits(s);
  };
  EXPECT_EQ(streaming(8, 32), 8);
  EXPECT_EQ(streaming(16, 128), 4);
  EXPECT_EQ(streaming(32, 512), 2);
  EXPECT_EQ(streaming(64, 1024), 1);
  EXPECT_EQ(streaming(8, 8), 2);    // 1024 keys: 4 blocks per split
  EXPECT_EQ(streaming(8, 5), 1);
  EXPECT_EQ(streaming(1, 1024), 66);
  // With the HBM bandwidth: bandwidth / 72 GB/s CTAs, rounded to the nearest count, at most the SMs.
  auto streaming_at = [](double hbm, int64_t tiles, int64_t blocks) {
    detail::SplitShape s{tiles, blocks, 132};
    s.streams_kv = true;
    s.hbm_bytes_per_s = hbm;
    return choose_num_splits(s);
  };
  EXPECT_EQ(streaming_at(4.81e12, 8, 1024), 8);    // 66.8 CTAs: 8.35
  EXPECT_EQ(streaming_at(4.81e12, 24, 1024), 3);   // 2.78
  // Long streams (>= 64 key blocks) whose count fills half the SMs or fewer: one full wave (132 / tiles).
  EXPECT_EQ(streaming_at(4.81e12, 64, 63), 1);     // 1.04
  EXPECT_EQ(streaming_at(4.81e12, 64, 64), 2);     // 1.04 -> 2 x 64 = 128 CTAs
  EXPECT_EQ(streaming_at(4.81e12, 32, 64), 4);     // 2.09 -> 4 x 32
  EXPECT_EQ(streaming_at(4.81e12, 32, 63), 2);
  EXPECT_EQ(streaming_at(4.81e12, 34, 1024), 3);   // 1.96 -> 3 x 34 = 102
  EXPECT_EQ(streaming_at(4.81e12, 66, 1024), 2);   // 1.01 -> 132
  EXPECT_EQ(streaming_at(4.81e12, 67, 1024), 1);   // 0.997: a wave is 1 split already
  EXPECT_EQ(streaming_at(4.81e12, 16, 1024), 4);   // 4.2: counts from 3 stay (b2 GQA 4)
  EXPECT_EQ(streaming_at(0, 32, 1024), 2);         // bandwidth unknown: half the SMs, no step
  EXPECT_EQ(streaming_at(4.81e12, 2, 1024), 33);
  EXPECT_EQ(streaming_at(4.81e12, 2, 32), 8);      // 4 key blocks a split at least
  EXPECT_EQ(streaming_at(3.35e12, 8, 1024), 6);    // 46.5 CTAs: 5.8
  EXPECT_EQ(streaming_at(3.35e12, 128, 1024), 1);  // 0.36: at least 1
  EXPECT_EQ(streaming_at(20e12, 2, 1024), 66);    // never more CTAs than SMs
  // Never more splits than key blocks or max_splits, streaming or not, the bandwidth known or not.
  for (int64_t tiles : {1, 3, 8, 40, 64, 200}) {
    for (int64_t blocks : {2, 7, 33, 64, 1000}) {
      for (double hbm : {0.0, 3.35e12, 4.81e12}) {
        detail::SplitShape s{tiles, blocks, 132, 64};
        s.hbm_bytes_per_s = hbm;
        for (bool streams : {false, true}) {
          s.streams_kv = streams;
          const int32_t n = choose_num_splits(s);
          EXPECT_GE(n, 1);
          EXPECT_LE(n, std::min<int64_t>(blocks, 64)) << tiles << " tiles, " << blocks << " blocks, " << hbm;
        }
      }
    }
  }
}

// The CUDA launch's split plan (plan_splits): a requested count as given (even past the key
// blocks), else the heuristic on the unsplit launch's tiles (GQA packed for decode) and the key
// blocks of the longest sequence; the base tile space it hands to the cluster rule and the
// schedule, whichever way the count came; and the workspace's size.
TEST(SplitPlan, CountsOfTheCudaLaunch) {
  using cuda_backend::AttnParams;
  using cuda_backend::MaskClass;
  AttnParams a;
  a.batch = 1;
  a.heads_q = 32;
  a.heads_kv = 8;
  a.q_per_kv = 4;
  a.seqlen_q = 1;
  a.seqlen_k = 4096;
  const cuda_backend::GqaPack pack = cuda_backend::choose_gqa_pack(4, 1, false);
  auto plan = [&](int requested, const AttnParams& p) {
    const cuda_backend::GqaPack pk = cuda_backend::choose_gqa_pack(p.q_per_kv, p.seqlen_q, false);
    return cuda_backend::plan_splits(requested, p, MaskClass::None, pk, 128, 128, 132, 0).splits;
  };
  EXPECT_EQ(pack.groups, 1);
  for (int requested : {0, 5}) {  // the base space is plan_tile_space's for the split kernel's rows
    const cuda_backend::SplitPlan sp = cuda_backend::plan_splits(requested, a, MaskClass::None, pack, 128, 128, 132, 0);
    cuda_backend::TileSchedule s;
    const int64_t tiles = cuda_backend::plan_tile_space(a, MaskClass::None, pack, 128, true, s);
    EXPECT_EQ(sp.base.tiles, 8);
    EXPECT_EQ(sp.base.tiles, tiles);
    EXPECT_TRUE(sp.base.pad_first_ok);
    EXPECT_EQ(sp.base.s.tiles, s.tiles);
    EXPECT_EQ(sp.base.s.tile_rows, 128);
    EXPECT_EQ(sp.base.s.pack_rows, s.pack_rows);
    EXPECT_EQ(sp.base.s.batch_heads, s.batch_heads);
    EXPECT_EQ(sp.base.s.head_slots, s.head_slots);
  }
  EXPECT_EQ(plan(0, a), 8);    // 8 packed tiles streaming K/V, 32 key blocks: 64 CTAs
  EXPECT_EQ(plan(5, a), 5);    // as requested
  EXPECT_EQ(plan(300, a), 300);  // more than the key blocks: splits that see no key
  AttnParams b = a;
  b.batch = 16;                // 128 tiles fill the machine
  EXPECT_EQ(plan(0, b), 1);
  b = a;
  b.seqlen_k = 100;            // one key block
  EXPECT_EQ(plan(0, b), 1);
  b = a;
  b.heads_q = b.heads_kv = 8;  // unpacked s_q 1: 8 tiles streaming K/V as well
  b.q_per_kv = 1;
  EXPECT_EQ(plan(0, b), 8);
  b.seqlen_q = 300;            // 3 q-blocks per head share its K/V: the wave rule (24 tiles)
  EXPECT_EQ(plan(0, b), 5);
  // Streaming GQA decode (h 32/8), bandwidth unknown: half the SMs, 8 / 4 / 2 splits at b1 / b2 / b4.
  auto decode = [&](int batch, int keys) {
    AttnParams d = a;
    d.batch = batch;
    d.seqlen_k = keys;
    return plan(0, d);
  };
  EXPECT_EQ(decode(1, 4096), 8);
  EXPECT_EQ(decode(1, 32768), 8);
  EXPECT_EQ(decode(2, 4096), 4);
  EXPECT_EQ(decode(2, 32768), 4);
  EXPECT_EQ(decode(4, 16384), 2);
  EXPECT_EQ(decode(8, 16384), 1);   // 64 tiles: unsplit (bandwidth unknown: no long-stream step)
  AttnParams m = a;                 // the same tiles unpacked (MHA: 16 tiles streaming K/V)
  m.batch = 2;
  m.heads_q = m.heads_kv = 8;
  m.q_per_kv = 1;
  m.seqlen_k = 16384;
  EXPECT_EQ(plan(0, m), 4);
  // With the device's HBM bandwidth known, a streaming decode aims at bandwidth / 72 GB/s CTAs:
  // the H200's 4.81 TB/s (67 CTAs) takes the counts measured best there (session 47's sweep): 8 /
  // 4 / 2 / 1 splits at b1 / b2 / b4 / b8; the H100's 3.35 TB/s (46 CTAs) 6 / 3 / 1 / 1.
  auto decode_on = [&](double hbm, int batch, int keys) {
    AttnParams d = a;
    d.batch = batch;
    d.seqlen_k = keys;
    const cuda_backend::GqaPack pk = cuda_backend::choose_gqa_pack(4, 1, false);
    return cuda_backend::plan_splits(0, d, MaskClass::None, pk, 128, 128, 132, hbm).splits;
  };
  constexpr double kH100 = 3.35e12, kH200 = 4.81e12;
  struct Count {
    double hbm;
    int batch, keys, splits;
  };
  // From 64 key blocks (8192 keys), counts that fill half the SMs or fewer take one full wave: H200 b4 (32
  // tiles, 2.09) 4, b8 (64 tiles, 1.04) 2; H100 b4 (1.45) 4, b8 (0.73) 2.
  const Count counts[] = {{kH200, 1, 4096, 8},  {kH200, 1, 32768, 8},  {kH200, 2, 4096, 4},  {kH200, 2, 32768, 4},
                          {kH200, 4, 4096, 2},  {kH200, 4, 8192, 4},   {kH200, 4, 32768, 4},  {kH200, 8, 4096, 1},
                          {kH200, 8, 8192, 2},  {kH200, 8, 8064, 1},   {kH200, 8, 65536, 2},  {kH200, 16, 65536, 1},
                          {kH100, 1, 4096, 6},  {kH100, 1, 32768, 6},  {kH100, 2, 8192, 3},  {kH100, 4, 4096, 1},
                          {kH100, 4, 8192, 4},  {kH100, 8, 4096, 1},   {kH100, 8, 65536, 2},  {kH100, 3, 8192, 5},
                          {kH100, 5, 8192, 3},  {kH200, 5, 8192, 3},   {kH200, 6, 8192, 2},   {kH200, 3, 8192, 3}};
  for (const Count& c : counts)
    EXPECT_EQ(decode_on(c.hbm, c.batch, c.keys), c.splits) << c.hbm << " B/s, b" << c.batch << " x " << c.keys;
  // Rows that fill both warpgroups (GQA 8 at s_q 16: 7 x 16 + 16 = 128) stream 50 GB/s a CTA: 96 CTAs on
  // the H200, 12 splits at b1; GQA 4 at s_q 16 (64 rows) keeps 72 GB/s: 8.
  AttnParams g8 = a;
  g8.q_per_kv = 8;
  g8.heads_q = 64;
  g8.seqlen_q = 16;
  g8.seqlen_k = 32768;
  const cuda_backend::GqaPack pk8 = cuda_backend::choose_gqa_pack(8, 16, false);
  ASSERT_EQ(int64_t(pk8.heads - 1) * pk8.rows + 16, 128);
  EXPECT_EQ(cuda_backend::plan_splits(0, g8, MaskClass::None, pk8, 128, 128, 132, kH200).splits, 12);
  g8.q_per_kv = 4;
  g8.heads_q = 32;
  EXPECT_EQ(cuda_backend::plan_splits(0, g8, MaskClass::None, cuda_backend::choose_gqa_pack(4, 16, false), 128, 128, 132,
                                      kH200).splits,
            8);
  AttnParams q16 = a;               // s_q 16 at GQA 4: one packed tile of 64 rows a KV head, as s_q 1
  q16.batch = 2;
  q16.seqlen_q = 16;
  q16.seqlen_k = 16384;
  EXPECT_EQ(plan(0, q16), 4);
  EXPECT_EQ(plan(3, q16), 3);       // a requested count as given
  EXPECT_EQ(cuda_backend::split_rows(a, 1), 32);
  AttnParams v = a;
  static const int32_t cu[2] = {0, 7};
  v.cu_seqlens_q = cu;
  EXPECT_EQ(cuda_backend::split_rows(v, 7), 32 * 7);
  // 3 splits x 32 rows x 128 floats, padded to 256 bytes, then 3 x 32 LSEs.
  EXPECT_EQ(cuda_backend::split_workspace_bytes(3, 32, 128), 3 * 32 * 128 * 4 + 3 * 32 * 4);
  EXPECT_EQ(cuda_backend::split_workspace_bytes(1, 3, 8), 256 + 12);
}

// Where the splits merge inside thread-block clusters (merge_in_cluster): tiles whose stored rows
// (GQA-packed: (heads - 1) x R + s_q; unpacked: s_q from tile row 0), rounded up to a multiple of the
// splits (each row's owner takes a whole group of `splits` slots), are at most 64; 2-8 splits, every
// cluster in one wave.
TEST(SplitPlan, MergeInCluster) {
  using cuda_backend::choose_gqa_pack;
  using cuda_backend::merge_in_cluster;
  auto space = [](int64_t tiles) {  // a base tile space of `tiles` tiles, rows from tile row 0
    cuda_backend::TileSpace t;
    t.tiles = tiles;
    return t;
  };
  const cuda_backend::GqaPack decode = choose_gqa_pack(4, 1, false);  // h 32/8 s_q 1: 4 rows a tile
  EXPECT_TRUE(merge_in_cluster(8, space(8), decode, 1, 16));   // b1: 8 clusters of 8
  EXPECT_TRUE(merge_in_cluster(2, space(32), decode, 1, 66));  // b4: 32 clusters of 2
  EXPECT_TRUE(merge_in_cluster(2, space(1), decode, 1, 1));
  EXPECT_FALSE(merge_in_cluster(1, space(8), decode, 1, 16));   // unsplit
  EXPECT_FALSE(merge_in_cluster(9, space(8), decode, 1, 16));   // past the portable cluster size
  EXPECT_FALSE(merge_in_cluster(13, space(8), decode, 1, 16));
  EXPECT_FALSE(merge_in_cluster(8, space(17), decode, 1, 16));  // more clusters than fit at once
  EXPECT_FALSE(merge_in_cluster(8, space(8), decode, 1, 0));    // the device runs none of this size
  EXPECT_FALSE(merge_in_cluster(8, space(0), decode, 1, 16));
  EXPECT_FALSE(merge_in_cluster(2, space(8), decode, 2, 16));   // s_q past the pack's R
  // Stored rows: (G - 1) x R + s_q <= 64.
  EXPECT_TRUE(merge_in_cluster(4, space(4), choose_gqa_pack(16, 4, false), 4, 16));   // 15 x 4 + 4 = 64
  EXPECT_FALSE(merge_in_cluster(4, space(4), choose_gqa_pack(32, 4, false), 4, 16));  // 31 x 4 + 4 = 128
  EXPECT_TRUE(merge_in_cluster(4, space(4), choose_gqa_pack(4, 16, false), 16, 16));  // 3 x 16 + 16 = 64
  EXPECT_FALSE(merge_in_cluster(4, space(4), choose_gqa_pack(4, 17, false), 17, 16)); // 3 x 32 + 17 = 113
  EXPECT_TRUE(merge_in_cluster(4, space(4), choose_gqa_pack(2, 32, false), 32, 16));   // 1 x 32 + 32 = 64
  EXPECT_FALSE(merge_in_cluster(4, space(4), choose_gqa_pack(6, 32, false), 32, 16));  // 2 groups of G 3: 96
  // Rounded up to the splits: 64 rows need 66 slots at 3 splits (row 63's owner holds slots 63-65).
  EXPECT_TRUE(merge_in_cluster(2, space(4), choose_gqa_pack(16, 4, false), 4, 16));   // 64
  EXPECT_TRUE(merge_in_cluster(8, space(4), choose_gqa_pack(16, 4, false), 4, 16));   // 64
  EXPECT_FALSE(merge_in_cluster(3, space(4), choose_gqa_pack(16, 4, false), 4, 16));  // 66
  EXPECT_FALSE(merge_in_cluster(5, space(4), choose_gqa_pack(16, 4, false), 4, 16));  // 65
  EXPECT_FALSE(merge_in_cluster(7, space(4), choose_gqa_pack(16, 4, false), 4, 16));  // 70
  EXPECT_TRUE(merge_in_cluster(3, space(4), choose_gqa_pack(16, 3, false), 3, 16));   // 15 x 4 + 3 = 63
  EXPECT_TRUE(merge_in_cluster(7, space(4), choose_gqa_pack(16, 3, false), 3, 16));   // 63
  EXPECT_FALSE(merge_in_cluster(5, space(4), choose_gqa_pack(16, 3, false), 3, 16));  // 65
  EXPECT_TRUE(merge_in_cluster(5, space(4), choose_gqa_pack(16, 2, false), 2, 16));   // 15 x 2 + 2 = 32 -> 35
  // Unpacked tiles (MHA, varlen): s_q rows from tile row 0 (plan_splits's one m-block), else the whole
  // tile (rows at its bottom: the combine kernel).
  EXPECT_TRUE(merge_in_cluster(4, space(4), choose_gqa_pack(1, 1, false), 1, 16));
  EXPECT_TRUE(merge_in_cluster(4, space(4), choose_gqa_pack(4, 1, true), 1, 16));
  EXPECT_TRUE(merge_in_cluster(8, space(4), choose_gqa_pack(1, 64, false), 64, 16));
  EXPECT_FALSE(merge_in_cluster(3, space(4), choose_gqa_pack(1, 64, false), 64, 16));  // 66 slots
  EXPECT_FALSE(merge_in_cluster(4, space(4), choose_gqa_pack(1, 65, false), 65, 16));
  cuda_backend::TileSpace padded = space(4);
  padded.s.first_block_pad = 127;
  EXPECT_FALSE(merge_in_cluster(4, padded, choose_gqa_pack(1, 1, false), 1, 16));
  padded.s.first_block_pad = -1;  // varlen causal, longest first
  EXPECT_FALSE(merge_in_cluster(4, padded, choose_gqa_pack(4, 1, true), 1, 16));
}

// The narrow decode tile's rule (sched/split_plan.h: narrow_rows_fit): stored rows only in a tile's first 8,
// and at most 2048 keys of the longest sequence a split.
TEST(SplitPlan, NarrowRows) {
  using cuda_backend::choose_gqa_pack;
  using cuda_backend::narrow_rows_fit;
  cuda_backend::TileSchedule flat;  // first_block_pad 0
  cuda_backend::TileSchedule padded;
  padded.first_block_pad = -1;  // varlen causal: a sequence's padding rows first
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 4096, 8));   // h 32/8 decode: 4 rows
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(8, 1, false), 1, flat, 4096, 8));   // 8 heads x 1 row: 8
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(16, 1, false), 1, flat, 4096, 8)); // 16 rows
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(2, 3, false), 3, flat, 4096, 8));   // R 4: 1 x 4 + 3 = 7
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(2, 5, false), 5, flat, 4096, 8));  // R 8: 1 x 8 + 5 = 13
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(4, 2, false), 2, flat, 4096, 8));   // R 2, G 4: 3 x 2 + 2 = 8
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(1, 8, false), 8, flat, 4096, 8));   // unpacked s_q 8
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(1, 9, false), 9, flat, 4096, 8));
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(4, 1, true), 1, flat, 4096, 8));    // varlen: unpacked
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, true), 1, padded, 4096, 8));
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 0, flat, 4096, 8));  // no query rows
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 2, flat, 4096, 8));  // s_q past the pack's R
  // Key shares: ceil(s_k / splits) <= 2048.
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 16384, 8));
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 16385, 8));
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 32768, 8));
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 2048, 1));
  EXPECT_FALSE(narrow_rows_fit(choose_gqa_pack(4, 1, false), 1, flat, 4096, 0));
  // plan_splits keeps an unpacked tile's rows at tile row 0 where the tile space has one m-block (MHA decode,
  // causal or not; varlen causal), so those run narrow; longer query rows keep the padding-first order.
  using cuda_backend::AttnParams;
  using cuda_backend::MaskClass;
  AttnParams mha;
  mha.batch = 1;
  mha.heads_q = mha.heads_kv = 32;
  mha.q_per_kv = 1;
  mha.seqlen_k = 4096;
  const cuda_backend::GqaPack none{};
  auto plan_of = [&](int requested, const AttnParams& a, MaskClass mask, const cuda_backend::GqaPack& pack) {
    return cuda_backend::plan_splits(requested, a, mask, pack, 128, 128, 132, 4.8e12);
  };
  for (MaskClass mask : {MaskClass::None, MaskClass::Causal})
    for (int sq : {1, 8, 9, 64, 128}) {
      mha.seqlen_q = sq;
      const cuda_backend::SplitPlan p = plan_of(0, mha, mask, none);
      ASSERT_EQ(p.base.s.m_blocks, 1) << sq;
      EXPECT_EQ(p.base.s.first_block_pad, 0) << sq;
      EXPECT_EQ(p.base.s.heavy_first, 0) << sq;
      EXPECT_EQ(narrow_rows_fit(none, sq, p.base.s, 4096, p.splits), sq <= 8) << sq;
      EXPECT_GE(p.splits, 2) << sq;
    }
  mha.seqlen_q = 200;  // two m-blocks, causal: the first holds the 56 padding rows
  const cuda_backend::SplitPlan two = plan_of(4, mha, MaskClass::Causal, none);
  EXPECT_EQ(two.base.s.first_block_pad, 56);
  EXPECT_EQ(two.base.s.heavy_first, 1);
  AttnParams v = mha;  // varlen causal, at most 5 rows a sequence
  static const int32_t cu[3] = {0, 5, 7};
  v.cu_seqlens_q = cu;
  v.batch = 2;
  v.seqlen_q = 5;
  const cuda_backend::SplitPlan vp = plan_of(4, v, MaskClass::Causal, choose_gqa_pack(1, 5, true));
  EXPECT_EQ(vp.base.s.first_block_pad, 0);
  EXPECT_TRUE(narrow_rows_fit(choose_gqa_pack(1, 5, true), 5, vp.base.s, 4096, 4));
  // The same plans' cluster rule: MHA causal s_q 1 and varlen causal merge in clusters, rows from tile row 0.
  mha.seqlen_q = 1;
  EXPECT_TRUE(cuda_backend::merge_in_cluster(4, plan_of(4, mha, MaskClass::Causal, none).base, none, 1, 64));
  EXPECT_TRUE(cuda_backend::merge_in_cluster(4, vp.base, choose_gqa_pack(1, 5, true), 5, 64));
  EXPECT_FALSE(cuda_backend::merge_in_cluster(4, two.base, none, 200, 64));
}

}  // namespace
}  // namespace fastattn::testing
