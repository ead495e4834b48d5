// forward_kvcache on the host backends against an independent model (support/kv_case.h): the
// cache after the append (positions, rotary both styles, cache_batch_idx, pages), the attention
// over [leftpad, cache_seqlens + s_new) through the float64 oracle (FA3's tolerance rule), every
// cache_seqlens edge (0, 1, full), s_new 0 and > 0, paged vs contiguous bit for bit, and the
// validation rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "api/kvcache_cuda.h"
#include "util/half.h"
#include "fastattn/fastattn.h"
#include "support/compare.h"
#include "support/kv_case.h"

namespace fastattn::testing {
namespace {



void expect_cache(const char* name, const HostTensor& got, const std::vector<double>& want,
                  const std::vector<bool>* rotated, DType dt, const std::string& ctx) {
  const std::vector<double> g = got.to_f64();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {  // a position outside every sequence's keys (KvSpec::nan_past_keys): untouched
      ASSERT_TRUE(std::isnan(g[i])) << name << "[" << i << "] = " << g[i] << " but expected NaN; " << ctx;
      continue;
    }
    // A rotated element: one rounding of its dtype, plus the fp32 products' rounding (|terms| <= 2).
    const double tol = rotated && (*rotated)[i] ? ulp(dt, want[i]) + 0x1p-22 : 0.0;
    ASSERT_LE(std::fabs(g[i] - want[i]), tol) << name << "[" << i << "] = " << g[i] << " but expected " << want[i]
                                              << "; " << ctx;
  }
}

void expect_close(const char* name, const HostTensor& got, const std::vector<double>& ref, DType dt,
                  DType out_dt, const std::string& ctx) {
  EXPECT_EQ(got.count_nan(), 0) << name << ": elements not written; " << ctx;
  const double eps = dt == DType::F32 ? 1e-5 * rounding_step(DType::F32, ref) / 0x1p-23 : rounding_step(dt, ref);
  const Comparison c = compare(got.to_f64(), ref, rounded(ref, out_dt), eps);
  EXPECT_TRUE(c.ok) << c.describe(name) << "; " << ctx;
}

void check_kvcache(const KvSpec& spec, Backend be) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  KvCase c = make_kv_case(spec, rng);
  const std::string ctx = spec.describe() + ", backend " + std::to_string(int(be)) + ", " + seed_note(seed);
  const KvExpected e = expected_kvcache(c);
  ASSERT_FALSE(e.attn.out.empty() && c.out.numel() > 0) << "the model's reference call failed; " << ctx;
  if (spec.nan_past_keys) {
    ASSERT_GT(c.v_cache.count_nan(), 0) << "no NaN past the keys; " << ctx;
  }
  const Status st = forward_kvcache(c.args(be));
  ASSERT_TRUE(st.ok()) << st.message << "; " << ctx;
  expect_cache("k_cache", c.k_cache, e.k_cache, &e.k_rotated, spec.dtype, ctx);
  expect_cache("v_cache", c.v_cache, e.v_cache, nullptr, spec.dtype, ctx);
  expect_close("out", c.out, e.attn.out, spec.dtype, spec.dtype, ctx);
  expect_close("lse", c.lse, e.attn.lse, spec.dtype, DType::F32, ctx);
}

struct NamedKv {
  const char* name;
  KvSpec spec;
};
void PrintTo(const NamedKv& k, std::ostream* os) { *os << k.name; }

KvSpec decode() {
  KvSpec s;
  s.batch = 3;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = s.head_dim_v = 64;
  s.seqlen_cache = 64;
  s.seqlens = {0, 1, 63};  // empty, one token, full after the append
  s.seqlen_new = 1;
  return s;
}

std::vector<NamedKv> kv_cases() {
  std::vector<NamedKv> v;
  v.push_back({"decode_edges", decode()});
  KvSpec s = decode();
  s.seqlen_new = 0;
  s.seqlens = {0, 1, 64};
  v.push_back({"no_new_tokens_edges", s});
  s.pass_new = false;
  s.seqlens = {};
  v.push_back({"whole_cache", s});
  s = decode();
  s.dtype = DType::BF16;
  s.head_dim = s.head_dim_v = 128;
  s.seqlens = {0, 17, 60};
  s.seqlen_new = 4;
  s.rotary_dim = 64;
  s.causal = true;
  s.seqlen_q = 4;
  v.push_back({"append4_rotary_interleaved_causal_bf16", s});
  s.interleaved = false;
  s.causal = false;
  s.seqlen_q = 3;
  s.dtype = DType::F16;
  v.push_back({"rotary_neox_noncausal_fp16", s});
  s.window_left = 5;
  s.window_right = 0;
  s.seqlen_q = 2;
  s.rotary_dim = 128;
  v.push_back({"rotary_full_dim_local", s});
  s = decode();
  s.cache_batch = 5;
  s.batch_idx = {4, 0, 2};
  s.seqlens = {3, 0, 20};
  s.seqlen_new = 2;
  s.rotary_dim = 32;
  v.push_back({"cache_batch_idx", s});
  s = decode();
  s.leftpad = {2, 0, 5};
  s.seqlens = {10, 3, 5};
  s.seqlen_new = 3;
  s.seqlen_q = 3;
  s.causal = true;
  s.rotary_dim = 16;
  v.push_back({"leftpad_causal", s});
  s = decode();
  s.seqlen_q = 3;  // q rows past the one appended key: rotated at cache_seqlens + i, up to capacity + 1
  s.causal = true;
  s.rotary_dim = 32;
  s.interleaved = false;
  v.push_back({"rotary_causal_q_past_new", s});
  s = decode();
  s.page_size = 16;
  s.seqlens = {0, 31, 45};
  s.seqlen_new = 3;
  s.rotary_dim = 32;
  s.interleaved = false;
  s.causal = true;
  v.push_back({"paged16_rotary", s});
  s = decode();
  s.batch = 2;
  s.heads_q = 6;
  s.heads_kv = 3;
  s.head_dim = 17;
  s.head_dim_v = 40;
  s.seqlen_cache = 113;
  s.seqlens = {1, 96};
  s.seqlen_q = 17;
  s.seqlen_new = 17;
  s.rotary_dim = 16;
  s.softcap = 3.0f;
  s.causal = true;
  v.push_back({"odd_sizes_softcap", s});
  s.num_splits = 3;  // split-KV over the gathered keys: the same result
  v.push_back({"odd_sizes_split3", s});
  // NaN in every cache position outside a sequence's keys (an uninitialised cache): none may reach out.
  s = decode();
  s.nan_past_keys = true;
  s.leftpad = {2, 0, 5};
  s.seqlens = {10, 3, 40};
  s.seqlen_new = s.seqlen_q = 3;
  s.causal = true;
  v.push_back({"nan_past_keys_leftpad", s});
  s.leftpad.clear();
  s.page_size = 16;
  s.num_splits = 2;
  v.push_back({"nan_past_keys_paged_split2", s});
  // ALiBi over the cache: the distance i + s_k - s_q - j with s_k the keys after the append from the left
  // padding on, and j counted from it (FlashAttention's flash_attn_with_kvcache).
  s = decode();
  s.alibi = 1;
  v.push_back({"alibi_decode_edges", s});
  s.alibi = 2;
  s.leftpad = {2, 0, 5};
  s.seqlens = {10, 3, 40};
  s.seqlen_new = s.seqlen_q = 3;
  s.causal = true;
  s.num_splits = 3;
  v.push_back({"alibi_per_batch_leftpad_causal_split3", s});
  s.leftpad.clear();
  s.page_size = 16;
  s.alibi = 1;
  s.causal = false;
  s.window_left = 7;
  s.window_right = 2;
  s.num_splits = 1;
  v.push_back({"alibi_paged_window", s});
  return v;
}

class KvCacheCases : public ::testing::TestWithParam<NamedKv> {};

TEST_P(KvCacheCases, CpuMatchesModel) { check_kvcache(GetParam().spec, Backend::CPU); }
TEST_P(KvCacheCases, ReferenceMatchesModel) { check_kvcache(GetParam().spec, Backend::Reference); }

INSTANTIATE_TEST_SUITE_P(Cases, KvCacheCases, ::testing::ValuesIn(kv_cases()),
                         [](const ::testing::TestParamInfo<NamedKv>& p) { return p.param.name; });

// The same logical cache in pages gives the same bits: out, lse and the appended tokens.
TEST(KvCache, PagedEqualsContiguousBitwise) {
  for (int page : {16, 32}) {
    KvSpec s = decode();
    s.dtype = DType::BF16;
    s.seqlens = {5, 0, 40};
    s.seqlen_new = 7;
    s.seqlen_q = 7;
    s.rotary_dim = 32;
    s.causal = true;
    const uint64_t seed = test_seed();
    Rng rng(seed);
    KvCase c = make_kv_case(s, rng);
    KvCase p = to_paged(c, page, rng);
    ASSERT_TRUE(forward_kvcache(c.args()).ok());
    ASSERT_TRUE(forward_kvcache(p.args()).ok());
    const std::string ctx = "page " + std::to_string(page) + ", " + seed_note(seed);
    EXPECT_EQ(std::memcmp(c.out.view().data, p.out.view().data, size_t(c.out.numel()) * 2), 0) << ctx;
    EXPECT_EQ(std::memcmp(c.lse.view().data, p.lse.view().data, size_t(c.lse.numel()) * 4), 0) << ctx;
    for (int b = 0; b < s.batch; ++b) {
      for (int64_t pos = 0; pos < c.cached(b) + s.seqlen_new; ++pos) {
        const auto [r, at] = c.slot(b, pos);
        const auto [pr, pat] = p.slot(b, pos);
        const int64_t n = s.heads_kv * s.head_dim;
        for (int64_t x = 0; x < n; ++x) {
          ASSERT_EQ(c.k_cache.get((r * s.seqlen_cache + at) * n + x), p.k_cache.get((pr * page + pat) * n + x))
              << "k at (" << b << ", " << pos << "); " << ctx;
          ASSERT_EQ(c.v_cache.get((r * s.seqlen_cache + at) * n + x), p.v_cache.get((pr * page + pat) * n + x))
              << "v at (" << b << ", " << pos << "); " << ctx;
        }
      }
    }
  }
}

// An appended slot belongs to one sequence; storage that no entry appends to may be shared. Two
// sequences on one read-only prefix page give the bits of two copies of that page; a page that one
// entry appends to and another reads is refused, as is a cache row that two entries append to.
TEST(KvCache, AppendedSlotsBelongToOneSequence) {
  KvSpec s = decode();
  s.batch = 2;
  s.seqlen_cache = 48;
  s.page_size = 16;
  s.seqlens = {16, 21};
  s.seqlen_new = 3;
  const uint64_t seed = test_seed();
  Rng rng(seed);
  const KvCase c = make_kv_case(s, rng);
  const int pps = c.pages_per_seq();
  KvCase shared = c, copied = c;
  const int32_t prefix = c.page_table[0], other = c.page_table[size_t(pps)];
  shared.page_table[size_t(pps)] = prefix;  // sequence 1's first page is sequence 0's
  const Tensor& kv = c.k_cache.view();
  for (int64_t at = 0; at < s.page_size; ++at) {  // the copy: sequence 1's own first page, same values
    for (int64_t h = 0; h < s.heads_kv; ++h) {
      for (int64_t x = 0; x < s.head_dim; ++x) {
        copied.k_cache.set(flat4(kv, other, at, h, x), c.k_cache.get(flat4(kv, prefix, at, h, x)));
        copied.v_cache.set(flat4(c.v_cache.view(), other, at, h, x),
                           c.v_cache.get(flat4(c.v_cache.view(), prefix, at, h, x)));
      }
    }
  }
  const Status st = forward_kvcache(shared.args());
  ASSERT_TRUE(st.ok()) << st.message << "; " << seed_note(seed);
  ASSERT_TRUE(forward_kvcache(copied.args()).ok()) << seed_note(seed);
  EXPECT_EQ(shared.out.count_nan(), 0) << seed_note(seed);
  EXPECT_EQ(shared.out.to_f64(), copied.out.to_f64()) << seed_note(seed);
  EXPECT_EQ(shared.lse.to_f64(), copied.lse.to_f64()) << seed_note(seed);

  // Sequence 0 appends into the page it shares (positions 12-14 of 15 cached): refused, nothing written.
  KvCase clash = shared;
  clash.seqlens = {12, 21};
  clash.out.poison();
  const std::vector<double> k_before = clash.k_cache.to_f64();
  const Status refused = forward_kvcache(clash.args());
  EXPECT_EQ(int(refused.code), int(Code::InvalidArgument));
  EXPECT_NE(refused.message.find("page_table: batch entries 0 and 1 share page " + std::to_string(prefix) +
                                 ", where entry 0 appends positions [12, 15) and entry 1 uses [0, 16)"),
            std::string::npos)
      << refused.message;
  EXPECT_EQ(clash.out.count_nan(), clash.out.numel()) << "out was written";
  EXPECT_EQ(clash.k_cache.to_f64(), k_before) << "the cache was written";

  // A sequence that lists one page twice and appends into its second listing would overwrite its own keys.
  KvCase twice = c;
  twice.seqlens = {16, 33};
  twice.page_table[size_t(pps + 2)] = twice.page_table[size_t(pps)];
  twice.out.poison();
  const Status self = forward_kvcache(twice.args());
  EXPECT_EQ(int(self.code), int(Code::InvalidArgument));
  EXPECT_NE(self.message.find("page_table: batch entry 1 reaches page " + std::to_string(other) +
                              " twice: its append writes positions [33, 36) into slots that also hold its positions "
                              "[0, 16)"),
            std::string::npos)
      << self.message;
  EXPECT_EQ(twice.out.count_nan(), twice.out.numel()) << "out was written";

  // Without an append the same sharing is a read-only prefix: allowed.
  KvSpec r = s;
  r.seqlen_new = 0;
  r.seqlens = {12, 21};
  Rng rng2(seed + 1);
  KvCase read_only = make_kv_case(r, rng2);
  read_only.page_table[size_t(pps)] = read_only.page_table[0];
  EXPECT_TRUE(forward_kvcache(read_only.args()).ok()) << seed_note(seed);
}

// Validation: the call fails naming the argument, and neither the cache nor out is touched.
struct KvRule {
  const char* name;
  std::function<void(KvCacheArgs&, KvCase&)> mutate;
  Code code;
  const char* message;
};

TEST(KvCache, ValidationRules) {
  const Code bad = Code::InvalidArgument, unsup = Code::NotSupported;
  const std::vector<KvRule> rules = {
      {"num_splits", [](KvCacheArgs& a, KvCase&) { a.num_splits = -1; }, bad, "num_splits: must be in [0, 1024]"},
      {"num_splits_huge", [](KvCacheArgs& a, KvCase&) { a.num_splits = 1 << 30; }, bad,
       "num_splits: must be in [0, 1024]"},
      {"cache_dtype", [](KvCacheArgs& a, KvCase&) { a.k_cache.dtype = DType::BF16; }, bad, "k_cache: dtype bf16"},
      {"v_cache_rows", [](KvCacheArgs& a, KvCase&) { a.v_cache.shape[1] = 3; }, bad, "v_cache: expected shape"},
      {"cache_rows", [](KvCacheArgs& a, KvCase&) { a.k_cache.shape[0] = a.v_cache.shape[0] = 2; }, bad,
       "k_cache: has 2 batch rows but q has batch 3"},
      {"k_new_alone", [](KvCacheArgs& a, KvCase&) { a.v_new = Tensor{}; }, bad, "v_new: missing"},
      {"new_without_seqlens", [](KvCacheArgs& a, KvCase&) { a.cache_seqlens = {}; }, bad,
       "cache_seqlens: required with k_new/v_new"},
      {"k_new_heads", [](KvCacheArgs& a, KvCase&) { a.k_new.shape[2] = 1; }, bad, "k_new: expected shape"},
      {"seqlens_size", [](KvCacheArgs& a, KvCase&) { a.cache_seqlens.size = 2; }, bad,
       "cache_seqlens: has 2 entries but batch is 3"},
      {"seqlens_overflow", [](KvCacheArgs&, KvCase& c) { c.seqlens[2] = 64; }, bad,
       "cache_seqlens: entry 2 is 64 but must be in [0, 63]"},
      {"seqlens_negative", [](KvCacheArgs&, KvCase& c) { c.seqlens[0] = -1; }, bad, "cache_seqlens: entry 0 is -1"},
      {"leftpad_past_seqlen", [](KvCacheArgs& a, KvCase& c) {
         c.leftpad = {0, 2, 0};
         a.cache_leftpad = {c.leftpad.data(), 3};
       }, bad, "cache_leftpad: entry 1 is 2 but must be in [0, cache_seqlens = 1]"},
      {"batch_idx_range", [](KvCacheArgs& a, KvCase& c) {
         c.batch_idx = {0, 3, 1};
         a.cache_batch_idx = {c.batch_idx.data(), 3};
       }, bad, "cache_batch_idx: entry 1 is 3 but the cache has 3 batch rows"},
      {"append_shared_row", [](KvCacheArgs& a, KvCase& c) {  // entry 1 reads the slot entry 0 appends
         c.batch_idx = {1, 1, 2};
         a.cache_batch_idx = {c.batch_idx.data(), 3};
       }, bad, "cache_batch_idx: batch entries 0 and 1 share cache row 1, where entry 0 appends positions [0, 1) and "
               "entry 1 uses [0, 2)"},
      {"rotary_alone", [](KvCacheArgs& a, KvCase& c) { a.rotary_cos = c.q.view(); }, bad, "rotary_sin: missing"},
      {"rotary_dim", [](KvCacheArgs& a, KvCase& c) {
         c.cos = HostTensor(DType::F32, {64, 4});
         c.sin = HostTensor(DType::F32, {64, 4});
         a.rotary_cos = c.cos.view();
         a.rotary_sin = c.sin.view();
       }, bad, "rotary_cos: rotary_dim (2 * dim 1) is 8 but must be a multiple of 16"},
      {"rotary_short", [](KvCacheArgs& a, KvCase& c) {
         c.cos = HostTensor(DType::F32, {32, 8});
         c.sin = HostTensor(DType::F32, {32, 8});
         a.rotary_cos = c.cos.view();
         a.rotary_sin = c.sin.view();
       }, bad, "rotary_cos: has 32 positions but the cache holds 64"},
      {"rotary_q_past_new", [](KvCacheArgs& a, KvCase& c) {  // q row 2 of 3 would read position 65
         c.cos = HostTensor(DType::F32, {64, 8});
         c.sin = HostTensor(DType::F32, {64, 8});
         a.rotary_cos = c.cos.view();
         a.rotary_sin = c.sin.view();
         a.causal = true;
         a.q.shape[1] = a.out.shape[1] = a.lse.shape[2] = 3;
       }, bad, "rotary_cos: has 64 positions but needs 66"},
      {"broadcast_cache", [](KvCacheArgs& a, KvCase&) { a.k_cache.stride[2] = 0; }, bad,
       "k_cache: dim 2 has stride 0 (a broadcast view) but k_new / v_new are appended"},
      {"paged_positions_over_int32", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 4, 0);
         a.page_table = {c.page_table.data(), 3, int64_t(1) << 28};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "page_table: 268435456 pages of 16 positions give a sequence 4294967296 positions"},
      {"cache_over_int32", [](KvCacheArgs& a, KvCase&) {
         a.k_cache.shape[1] = a.v_cache.shape[1] = int64_t(1) << 31;
         a.k_cache.stride[1] = a.v_cache.stride[1] = 0;
       }, bad, "k_cache: dim 1 has size 2147483648 but sizes are limited to 2^31 - 1"},
      {"page_size", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 8, 0);
         a.page_table = {c.page_table.data(), 3, 8};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 8;
       }, bad, "k_cache: page_size (dim 1) is 8 but a paged cache needs a multiple of 16"},
      {"page_size_24", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 2, 0);
         a.page_table = {c.page_table.data(), 3, 2};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 24;
       }, bad, "k_cache: page_size (dim 1) is 24 but a paged cache needs a multiple of 16"},
      {"page_table_rows", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(2 * 4, 0);
         a.page_table = {c.page_table.data(), 2, 4};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "page_table: has 2 rows but batch is 3"},
      {"page_table_empty_rows", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3, 0);
         a.page_table = {c.page_table.data(), 3, 0};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "page_table: pages_per_seq must be >= 1 but got 0"},
      {"page_negative", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 4, 0);
         c.page_table[2 * 4 + 3] = -1;
         a.page_table = {c.page_table.data(), 3, 4};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "page_table: entry (2, 3) is -1 but the cache has 3 pages"},
      {"paged_batch_idx", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 4, 0);
         c.batch_idx = {0, 1, 2};
         a.page_table = {c.page_table.data(), 3, 4};
         a.cache_batch_idx = {c.batch_idx.data(), 3};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "cache_batch_idx: not allowed with a paged cache"},
      {"page_out_of_range", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 4, 0);
         c.page_table[4 + 0] = 9;
         a.page_table = {c.page_table.data(), 3, 4};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, bad, "page_table: entry (1, 0) is 9 but the cache has 3 pages"},
      {"paged_leftpad", [](KvCacheArgs& a, KvCase& c) {
         c.page_table.assign(3 * 4, 0);
         c.leftpad = {0, 0, 0};
         a.page_table = {c.page_table.data(), 3, 4};
         a.cache_leftpad = {c.leftpad.data(), 3};
         a.k_cache.shape[1] = a.v_cache.shape[1] = 16;
       }, unsup, "cache_leftpad: not supported with a paged cache"},
      {"lse_shape", [](KvCacheArgs& a, KvCase&) { a.lse.shape[2] = 2; }, bad, "lse: expected shape"},
      {"alibi_dtype", [](KvCacheArgs& a, KvCase&) { a.alibi_slopes = make_tensor(a.q.data, DType::BF16, {8}); },
       bad, "alibi_slopes: dtype bf16 but expected fp32"},
      {"alibi_heads", [](KvCacheArgs& a, KvCase&) { a.alibi_slopes = make_tensor(a.q.data, DType::F32, {2}); },
       bad, "alibi_slopes: shape (2) but its last dim must be heads_q 8"},
      {"alibi_batch", [](KvCacheArgs& a, KvCase&) { a.alibi_slopes = make_tensor(a.q.data, DType::F32, {2, 8}); },
       bad, "alibi_slopes: shape (2, 8) but its first dim must be batch 3"},
      {"head_dim_limit", [](KvCacheArgs& a, KvCase&) { a.backend = Backend::CUDA; }, Code::NotSupported, ""},
  };
  for (const KvRule& r : rules) {
    Rng rng(test_seed());
    KvSpec s = decode();
    s.seqlens = {0, 1, 63};
    KvCase c = make_kv_case(s, rng);
    const std::vector<double> k_before = c.k_cache.to_f64();
    KvCacheArgs a = c.args();
    r.mutate(a, c);
    const Status st = forward_kvcache(a);
    if (std::string(r.name) == "head_dim_limit") {
      // Built without CUDA: NotSupported; with CUDA: host tensors for the CUDA backend.
      EXPECT_FALSE(st.ok()) << r.name;
    } else {
      EXPECT_EQ(int(st.code), int(r.code)) << r.name << ": " << st.message;
      EXPECT_NE(st.message.find(r.message), std::string::npos) << r.name << ": \"" << st.message << "\"";
    }
    EXPECT_EQ(c.out.count_nan(), c.out.numel()) << r.name << ": out was written";
    EXPECT_EQ(c.k_cache.to_f64(), k_before) << r.name << ": the cache was written";
  }
}

// The CUDA forward's TMA maps span the whole cache where it addresses the cache itself (page table,
// cache_batch_idx, leftpad), so the cache's own dim 0 (pages or rows) needs a positive 16-byte stride
// even at batch 1, where check_forward's check of the (batch, capacity, h_kv, d) operand skips it: a
// page stride of 0 (pages aliased), negative (a reversed pool) or off 16 bytes would be read with
// another stride. Elsewhere dim 0 counts over q's batch rows. Host only: checked without a device.
TEST(KvCache, CudaCacheStrides) {
  uint16_t storage[16];
  auto cache = [&](int64_t rows, int64_t row_stride) {
    Tensor t = make_tensor(storage, DType::BF16, {rows, 16, 2, 64}, Device::CUDA);
    t.stride[0] = row_stride;
    return t;
  };
  const int32_t index[1] = {0};
  const int64_t dense = 16 * 2 * 64;
  // Without page table, batch index or leftpad the forward reads q's batch rows of the cache.
  KvCacheArgs a;
  a.q = make_tensor(storage, DType::BF16, {1, 1, 4, 64}, Device::CUDA);
  a.k_cache = a.v_cache = cache(8, dense);
  EXPECT_TRUE(detail::check_cuda_cache_strides(a).ok());
  a.k_cache = cache(8, 0);
  EXPECT_TRUE(detail::check_cuda_cache_strides(a).ok()) << "batch 1 reads row 0 only";
  a.q.shape[0] = 2;
  EXPECT_EQ(detail::check_cuda_cache_strides(a).message.rfind("k_cache: dim 0 has stride 0", 0), 0u);
  a.k_cache = cache(8, dense);
  a.v_cache.stride[1] = -a.v_cache.stride[1];  // tokens reversed
  EXPECT_EQ(detail::check_cuda_cache_strides(a).message.rfind("v_cache: dim 1 has stride -128", 0), 0u);
  for (int layout = 0; layout < 3; ++layout) {
    KvCacheArgs b;
    b.q = make_tensor(storage, DType::BF16, {1, 1, 4, 64}, Device::CUDA);
    if (layout == 0) b.page_table = {index, 1, 1};
    if (layout == 1) b.cache_batch_idx = {index, 1};
    if (layout == 2) b.cache_leftpad = {index, 1};
    SCOPED_TRACE("layout " + std::to_string(layout));
    b.k_cache = b.v_cache = cache(8, dense);
    EXPECT_TRUE(detail::check_cuda_cache_strides(b).ok());
    b.k_cache = cache(8, dense + 8);  // a 16-byte gap between pages: fine
    EXPECT_TRUE(detail::check_cuda_cache_strides(b).ok());
    b.k_cache = cache(1, 0);  // one page: its stride is never used
    EXPECT_TRUE(detail::check_cuda_cache_strides(b).ok());
    b.k_cache = cache(0, 0);  // no page: nothing is read
    EXPECT_TRUE(detail::check_cuda_cache_strides(b).ok());
    for (int64_t bad : {int64_t(0), -dense, dense + 1, dense + 4}) {
      b.k_cache = cache(8, dense);
      b.v_cache = cache(8, bad);
      Status st = detail::check_cuda_cache_strides(b);
      EXPECT_EQ(int(st.code), int(Code::NotSupported)) << bad;
      EXPECT_EQ(st.message.rfind("v_cache: dim 0 has stride " + std::to_string(bad), 0), 0u) << st.message;
      std::swap(b.k_cache, b.v_cache);
      st = detail::check_cuda_cache_strides(b);
      EXPECT_EQ(st.message.rfind("k_cache: dim 0 has stride " + std::to_string(bad), 0), 0u) << st.message;
    }
    b.k_cache = b.v_cache = cache(8, dense);
    b.k_cache.stride[2] = 0;  // heads broadcast
    EXPECT_EQ(detail::check_cuda_cache_strides(b).message.rfind("k_cache: dim 2 has stride 0", 0), 0u);
  }
}

}  // namespace
}  // namespace fastattn::testing
