// Element bitmasks (MaskKind::DenseBitmask) on the host: the oracle against the definition, the CPU
// backend's tile classes and partial-tile masking against the oracle, the accumulator bit order the
// CUDA prep packs (mask/bit_order.h) against its definition, CPU forward and backward against the
// float64 reference (bit_mask_cases.h), and the exact cases: no kept bit gives out 0 / lse -inf / zero
// gradients, an all-ones mask equals no mask bit for bit, causal spelled as bits equals causal bit for
// bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "api/validate.h"
#include "bit_mask_cases.h"
#include "cpu/tile_class.h"
#include "cpu/tiling.h"
#include "cpu_check.h"
#ifdef FASTATTN_WITH_CUDA
#include "cuda/block_mask_rule.h"
#endif
#include "cuda/mask/bit_order.h"
#include "cuda/mask/block_list_build.h"
#include "fastattn/fastattn.h"
#include "reference/mask_oracle.h"

namespace fastattn::testing {
namespace {

// The list a tile's prep builds (bit_tile_lists_kernel / bwd_bit_tile_lists_kernel) for the window's
// blocks r and per-block classes cls, built on the host: parts 0, 1, 2 (bit_list_part), each ascending,
// entries 2 * block + needs-bits; `storage` holds the entries the returned list points into.
// `deterministic`: the deterministic backward's list (bit_list_det_edges: bit-partial blocks below the first
// full one in part 0).
cuda_backend::BitList host_bit_list(const cuda_backend::BlockRange& r, const std::vector<uint8_t>& cls,
                                    std::vector<int>* storage, bool deterministic = false) {
  int edge[4];
  cuda_backend::block_list_edges(r, edge);
  if (deterministic) cuda_backend::bit_list_det_edges(cls.data(), edge);
  int count[3] = {0, 0, 0};
  storage->clear();
  for (int part = 0; part < 3; ++part)
    for (int n = edge[0]; n < edge[1]; ++n)
      if (cuda_backend::bit_list_part(n, cls[size_t(n)], edge[2], edge[3]) == part) {
        storage->push_back(2 * n + (cls[size_t(n)] == cuda_backend::kBitsPartial ? 1 : 0));
        ++count[part];
      }
  cuda_backend::BitList l;
  l.begin = 0;
  l.end = count[0] + count[1] + count[2];
  l.full_begin = count[0];
  l.full_end = count[0] + count[1];
  l.list = storage->data();
  l.line = 0;
  return l;
}

TEST(BitMaskOracle, KeepIsWindowAndBits) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  for (const NamedCase& nc : bit_mask_cases()) {
    if (nc.spec.seqlen_q > 1000) continue;  // the element loop below is O(s_q s_k)
    AttnCase c = make_case(nc.spec, rng);
    detail::Prepared prep;
    ASSERT_TRUE(detail::prepare_forward(c.args(Backend::CPU), &prep).ok()) << nc.name;
    const detail::Problem& p = prep.problem;
    const reference::MaskOracle oracle(p);
    const BitMask m = c.bits.view_at();
    for (int64_t b = 0; b < p.batch; ++b) {
      const detail::Sequence& s = p.seqs[size_t(b)];
      const reference::MaskRule rule = oracle.rule(b);
      for (int64_t h = 0; h < p.heads_q; ++h) {
        const int64_t mb = m.shape[0] == 1 ? 0 : b, mh = h / (c.spec.heads_q / m.shape[1]);
        for (int64_t i = 0; i < s.rows_q; ++i) {
          for (int64_t j = 0; j < s.rows_k; ++j) {
            const bool want = reference::keep(rule, i, j) && c.bits.keeps(mb, mh, i, j);
            ASSERT_EQ(oracle.keep(b, h, i, j), want) << nc.name << " b " << b << " h " << h << " (" << i << ", "
                                                     << j << ") " << seed_note(seed);
          }
        }
      }
    }
  }
}

TEST(BitMaskTiles, ClassAndPartialMaskingMatchTheOracle) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  for (int trial = 0; trial < 4000; ++trial) {
    const reference::MaskRule rule{rng.uniform_int(0, 70), rng.uniform_int(0, 70), rng.uniform_int(-1, 12),
                                   rng.uniform_int(-1, 12)};
    // 70 rows x 3 words; a density of 1 a fifth of the time (Full tiles), else any.
    const float density = rng.uniform(0.0f, 1.0f) < 0.2f ? 1.0f : rng.uniform(0.0f, 1.0f);
    std::vector<uint32_t> words(70 * 3);
    for (int i = 0; i < 70; ++i)
      for (int j = 0; j < 96; ++j)
        if (rng.uniform(0.0f, 1.0f) < density) words[size_t(i * 3 + j / 32)] |= 1u << (j % 32);
    detail::BitMaskView v;
    v.data = words.data();
    v.row_stride = 3;
    v.rows = 70;
    v.words = 3;
    reference::HeadMask m{rule, nullptr, 0, 0, &v};
    const int i0 = rng.uniform_int(0, 70), j0 = rng.uniform_int(0, 70);
    const int rows = rng.uniform_int(1, 40), cols = rng.uniform_int(1, 40);
    ASSERT_NO_FATAL_FAILURE(check_tile_against_oracle(m, rule, i0, rows, j0, cols, seed_note(seed)));
  }
}

// quad_keep_word: bit 2j + e of thread t's word is key 8j + 2t + e of the row's 128 (keep_bits.cuh's
// accumulator order), read from bit (8j + 2t + e) % 32 of word (8j + 2t + e) / 32.
TEST(BitOrder, QuadKeepWordIsTheAccumulatorOrder) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 2000; ++trial) {
    uint32_t w[4];
    for (uint32_t& x : w) x = uint32_t(rng.uniform_int(0, 0xffff)) << 16 | uint32_t(rng.uniform_int(0, 0xffff));
    if (trial == 0) w[0] = w[1] = w[2] = w[3] = 0xffffffffu;
    for (int t = 0; t < 4; ++t) {
      const uint32_t got = cuda_backend::quad_keep_word(w, t);
      for (int j = 0; j < 16; ++j) {
        for (int e = 0; e < 2; ++e) {
          const int key = 8 * j + 2 * t + e;
          ASSERT_EQ((got >> (2 * j + e)) & 1u, (w[key / 32] >> (key % 32)) & 1u) << "t " << t << " key " << key;
        }
      }
    }
  }
}

// The CUDA prep's list of one tile (sm90/bit_lists.cu: parts by bit_list_part, each ascending) walked as
// the kernel walks it (BitList over positions, last first): every block its bits keep inside the window
// range is visited once; the walk's full positions are exactly the blocks full in both (the plain body
// runs only those, unmasked); a position applies bits iff its block is bit-partial; and with every
// block bit-full the visit order and the full / partial verdicts are the window's own (the unmasked
// kernel's walk).
TEST(BitMaskLists, TileListWalkKeepsTheContract) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 3000; ++trial) {
    const int len_k = rng.uniform_int(1, 2000), len_q = rng.uniform_int(1, 2000);
    const cuda_backend::WindowMask w{len_k, len_k - len_q, rng.uniform_int(-1, 600), rng.uniform_int(-1, 600)};
    const int m0 = 128 * rng.uniform_int(0, (len_q - 1) / 128), m1 = std::min(m0 + 128, len_q);
    const cuda_backend::BlockRange r = cuda_backend::key_blocks(w, m0, m1, 128);
    if (r.empty()) continue;
    const int n_blocks = (len_k + 127) / 128;
    const bool all_ones = trial % 5 == 0;
    std::vector<uint8_t> cls(static_cast<size_t>(n_blocks));
    for (auto& c : cls) c = all_ones ? uint8_t(cuda_backend::kBitsFull) : uint8_t(rng.uniform_int(0, 2));
    std::vector<int> list;
    const cuda_backend::BitList l = host_bit_list(r, cls, &list);
    std::vector<int> seen(size_t(n_blocks), 0), order;
    for (int it = l.first(); !l.done(it); it = l.next(it)) {
      const int n = l.block(it);
      ASSERT_TRUE(n >= r.begin && n < r.end) << trial;
      ++seen[size_t(n)];
      order.push_back(n);
      const bool window_full = n >= r.full_begin && n < r.full_end;
      ASSERT_EQ(l.full(it), window_full && cls[size_t(n)] == cuda_backend::kBitsFull) << trial << " block " << n;
      ASSERT_EQ(l.needs_bits(it), cls[size_t(n)] == cuda_backend::kBitsPartial) << trial;
      if (all_ones) {
        ASSERT_EQ(l.full(it), r.full(n)) << trial;
      }
    }
    for (int n = 0; n < n_blocks; ++n)
      ASSERT_EQ(seen[size_t(n)], n >= r.begin && n < r.end && cls[size_t(n)] != cuda_backend::kBitsEmpty ? 1 : 0)
          << trial << " block " << n;
    if (all_ones) {
      std::vector<int> window_order;
      for (int n = r.first(); !r.done(n); n = r.next(n)) window_order.push_back(n);
      ASSERT_EQ(order, window_order) << trial;
    }
  }
}

// The backward's S^T order (sm90/bwd/bit_lists.h): a thread's rows are keys and its columns queries, so the
// prep transposes each partial (key tile, q-block) block and writes, for key row r and quad thread t,
// quad_keep_word of the key's query words (query 32c + i at bit i of word c; words 2 and 3 zero for a 64-row
// q-block): bit 2j + e must be the bit of pair (query 8j + 2t + e, key r) of the caller's row-major words.
TEST(BitOrder, BackwardKeyRowWordIsTheSTransposedOrder) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    const int block_m = trial % 2 ? 64 : 128;
    std::vector<uint32_t> rows(size_t(block_m) * 4);  // the block's rows: query i's keys 32 kw + b at rows[4 i + kw]
    for (uint32_t& x : rows) x = uint32_t(rng.uniform_int(0, 0xffff)) << 16 | uint32_t(rng.uniform_int(0, 0xffff));
    for (int r = 0; r < 128; ++r) {
      uint32_t qw[4] = {0, 0, 0, 0};  // the transpose, as the prep's ballots make it
      for (int i = 0; i < block_m; ++i) qw[i / 32] |= ((rows[size_t(4 * i + r / 32)] >> (r % 32)) & 1u) << (i % 32);
      for (int t = 0; t < 4; ++t) {
        const uint32_t got = cuda_backend::quad_keep_word(qw, t);
        for (int j = 0; j < 16; ++j)
          for (int e = 0; e < 2; ++e) {
            const int q = 8 * j + 2 * t + e;
            const uint32_t want = q < block_m ? (rows[size_t(4 * q + r / 32)] >> (r % 32)) & 1u : 0u;
            ASSERT_EQ((got >> (2 * j + e)) & 1u, want) << "block_m " << block_m << " key " << r << " t " << t << " q " << q;
          }
      }
    }
  }
}

// The backward prep's list of one key tile (sm90/bit_lists.cu's bwd_bit_tile_lists_kernel: the column view,
// q-blocks of 64 rows inside query_blocks' range of a 128-key tile, parts by bit_list_part, each ascending)
// walked as the kernel walks positions: every q-block the bits keep inside the range is visited once, the
// full positions are exactly the blocks full in both, a position applies bits iff its block is bit-partial;
// and with classes that agree with the window (full where the window is full, partial elsewhere: causal
// spelled as bits under the causal window) the order and the verdicts are the window's own (the causal
// kernel's walk, so that its dk / dv sums come in the same order).
TEST(BitMaskLists, KeyTileListWalkKeepsTheContract) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 3000; ++trial) {
    const int len_k = rng.uniform_int(1, 2000), len_q = rng.uniform_int(1, 2000);
    const cuda_backend::WindowMask w{len_k, len_k - len_q, rng.uniform_int(-1, 600), rng.uniform_int(-1, 600)};
    const int n0 = 128 * rng.uniform_int(0, (len_k - 1) / 128);
    const cuda_backend::BlockRange r = cuda_backend::query_blocks(w, n0, n0 + 128, 64);
    if (r.empty()) continue;
    const int m_blocks = (len_q + 63) / 64;
    const bool window_like = trial % 5 == 0;
    std::vector<uint8_t> cls(static_cast<size_t>(m_blocks));
    for (int m = 0; m < m_blocks; ++m)
      cls[size_t(m)] = window_like ? uint8_t(r.full(m) ? cuda_backend::kBitsFull : cuda_backend::kBitsPartial)
                                   : uint8_t(rng.uniform_int(0, 2));
    int edge[4];
    cuda_backend::block_list_edges(r, edge);
    ASSERT_LE(edge[1], m_blocks) << trial;
    std::vector<int> list;
    const cuda_backend::BitList l = host_bit_list(r, cls, &list);
    std::vector<int> seen(size_t(m_blocks), 0), order;
    for (int it = l.first(); !l.done(it); it = l.next(it)) {
      const int m = l.block(it);
      ASSERT_TRUE(m >= r.begin && m < r.end) << trial;
      ++seen[size_t(m)];
      order.push_back(m);
      ASSERT_EQ(l.full(it), r.full(m) && cls[size_t(m)] == cuda_backend::kBitsFull) << trial << " q-block " << m;
      ASSERT_EQ(l.needs_bits(it), cls[size_t(m)] == cuda_backend::kBitsPartial) << trial;
      if (window_like) {
        ASSERT_EQ(l.full(it), r.full(m)) << trial;
      }
    }
    for (int m = 0; m < m_blocks; ++m)
      ASSERT_EQ(seen[size_t(m)], m >= r.begin && m < r.end && cls[size_t(m)] != cuda_backend::kBitsEmpty ? 1 : 0)
          << trial << " q-block " << m;
    if (window_like) {
      std::vector<int> window_order;
      for (int m = r.first(); !r.done(m); m = r.next(m)) window_order.push_back(m);
      ASSERT_EQ(order, window_order) << trial;
    }
  }
}

// The deterministic backward's list of one key tile (bwd_bit_tile_lists_kernel with the turns' scratch:
// bit_list_det_edges): the same contract as the default list (every kept q-block once, the full positions
// exactly the blocks full in both, bits where bit-partial), and where the bit-partial blocks inside the
// window's full range all lie below its first full one (a causal triangle or a document spelled as bits:
// the diagonal blocks partial, the rest full) the walk rises, as the dense deterministic walk does, so that
// a key tile's first adds wait only for the tile above's first steps (tile.cuh dq_turn).
TEST(BitMaskLists, DeterministicKeyTileListRises) {
  Rng rng(test_seed());
  for (int trial = 0; trial < 3000; ++trial) {
    const int len_k = rng.uniform_int(1, 2000), len_q = rng.uniform_int(1, 2000);
    const bool no_window = trial % 2 == 0;  // the bench's causal-as-bits: no window, the triangle in the bits
    const cuda_backend::WindowMask w{len_k, len_k - len_q, no_window ? -1 : rng.uniform_int(-1, 600),
                                     no_window ? -1 : rng.uniform_int(-1, 600)};
    const int n0 = 128 * rng.uniform_int(0, (len_k - 1) / 128);
    const cuda_backend::BlockRange r = cuda_backend::query_blocks(w, n0, n0 + 128, 64);
    if (r.empty()) continue;
    const int m_blocks = (len_q + 63) / 64;
    const bool triangle = trial % 3 != 0;  // else every class at random
    const int first_full = rng.uniform_int(r.begin, r.end);
    std::vector<uint8_t> cls(static_cast<size_t>(m_blocks));
    for (int m = 0; m < m_blocks; ++m) {
      if (!triangle)
        cls[size_t(m)] = uint8_t(rng.uniform_int(0, 2));
      else if (m < first_full)
        cls[size_t(m)] = uint8_t(rng.uniform_int(0, 1) == 0 ? cuda_backend::kBitsEmpty : cuda_backend::kBitsPartial);
      else
        cls[size_t(m)] = uint8_t(cuda_backend::kBitsFull);
    }
    std::vector<int> list;
    const cuda_backend::BitList l = host_bit_list(r, cls, &list, true);
    std::vector<int> seen(size_t(m_blocks), 0), order;
    for (int it = l.begin; it < l.end; ++it) {  // the deterministic walk: positions rising (kBwdWalkUp)
      const int m = l.block(it);
      ASSERT_TRUE(m >= r.begin && m < r.end) << trial;
      ++seen[size_t(m)];
      order.push_back(m);
      ASSERT_EQ(l.full(it), r.full(m) && cls[size_t(m)] == cuda_backend::kBitsFull) << trial << " q-block " << m;
      ASSERT_EQ(l.needs_bits(it), cls[size_t(m)] == cuda_backend::kBitsPartial) << trial;
    }
    for (int m = 0; m < m_blocks; ++m)
      ASSERT_EQ(seen[size_t(m)], m >= r.begin && m < r.end && cls[size_t(m)] != cuda_backend::kBitsEmpty ? 1 : 0)
          << trial << " q-block " << m;
    if (triangle) {
      for (size_t i = 1; i < order.size(); ++i) ASSERT_LT(order[i - 1], order[i]) << trial << " position " << i;
    }
  }
}

#ifdef FASTATTN_WITH_CUDA
// The CUDA rule for element bitmasks (cuda/block_mask_rule.h; host code, no device): the forward and the
// backward run d <= 128 with d_v = d; the backward refuses by name the deterministic mode, a softcap, mask
// heads that split a KV head's q heads, and lists past 2^31 entries.
TEST(CudaBitMaskRule, BackwardRunsUnderTheBlockSparseBackwardsRule) {
  detail::Problem p;
  p.head_dim = p.head_dim_v = 128;
  p.batch = 2;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.group = 4;
  p.max_rows_q = p.max_rows_k = 1000;
  p.bits.data = reinterpret_cast<const uint32_t*>(&p);
  p.bits.rows = 1000;
  p.bits.words = 32;
  p.bits.batch_stride = 1;
  auto refused = [&](bool backward, bool det, const char* what) {
    const Status st = cuda_backend::block_mask_support(p, backward, det);
    EXPECT_EQ(st.code, Code::NotSupported) << what;
    EXPECT_NE(st.message.find(what), std::string::npos) << st.message;
  };
  for (int head_div : {4, 8}) {  // mask heads heads_kv and 1: a KV head's q heads on one mask head
    p.bits.head_div = head_div;
    EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
    EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
    EXPECT_TRUE(cuda_backend::block_mask_support(p, true, true).ok());  // the deterministic backward runs
  }
  p.bits.head_div = 2;  // mask heads 4 for heads_kv 2: q heads of one KV head on two mask heads
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
  refused(true, false, "share a mask head");
  p.bits.head_div = 4;
  p.softcap = 20.f;  // both passes run a softcap (the backward: BitmaskBwdConfig's softcap kernels)
  EXPECT_TRUE(cuda_backend::block_mask_support(p, false).ok());
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true).ok());
  EXPECT_TRUE(cuda_backend::block_mask_support(p, true, true).ok());
  p.softcap = 0.f;
  p.head_dim = p.head_dim_v = 192;
  refused(true, false, "bitmask backward runs head dims up to 128");
  refused(false, false, "bitmask forward runs head dims up to 128");
  p.head_dim = p.head_dim_v = 128;
  p.max_rows_q = p.max_rows_k = 1 << 21;  // 2 x 2 mask heads x 16384 key tiles x 32768 q-blocks: 2^31
  p.bits.rows = p.max_rows_q;
  refused(true, false, "lists would exceed 2^31 entries");
}
#endif

class CpuBitMaskForward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBitMaskForward, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBitMaskForward, ::testing::ValuesIn(bit_mask_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

class CpuBitMaskBackward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBitMaskBackward, MatchesReference) { check_cpu_backward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBitMaskBackward, ::testing::ValuesIn(bit_mask_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

TEST(CpuBitMask, NoKeptBitGivesZeroOutMinusInfLseZeroGradients) {
  Rng rng(test_seed());
  for (bool is_varlen : {false, true}) {
    CaseSpec spec = bitmasked(shape(2, 33, 40, 2, 1, 16, 16, DType::F32), bits(BitPattern::Random, 0.0f, 2, true));
    if (is_varlen) spec = varlen(spec, {33, 0, 5}, {40, 7, 0});
    AttnCase c = make_case(spec, rng);
    run_cpu(c, c.args(Backend::CPU));
    for (const HostTensor* t : {&c.out, &c.dq, &c.dk, &c.dv}) {
      for (double x : t->to_f64()) ASSERT_EQ(x, 0.0);
    }
    for (double x : c.lse.to_f64()) ASSERT_EQ(x, -INFINITY);
  }
}

TEST(CpuBitMask, AllOnesEqualsNoMaskBitForBit) {
  Rng rng(test_seed());
  const CaseSpec spec =
      bitmasked(local(shape(2, 113, 90, 4, 2, 32, 32, DType::BF16), 30, 7), bits(BitPattern::AllOnes, 1.f, 2, true));
  AttnCase with_bits = make_case(spec, rng);
  AttnCase plain = with_bits;
  plain.bits = HostBitMask{};
  run_cpu(with_bits, with_bits.args(Backend::CPU));
  run_cpu(plain, plain.args(Backend::CPU));
  expect_same_bits(with_bits, plain, "all bits set vs no mask");
}

TEST(CpuBitMask, CausalBitsEqualCausalBitForBit) {
  Rng rng(test_seed());
  for (auto [sq, sk] : {std::pair{70, 100}, std::pair{100, 70}}) {
    AttnCase with_bits = make_case(bitmasked(shape(1, sq, sk, 2, 1, 32, 32, DType::F32), bits(BitPattern::Causal)), rng);
    AttnCase causal_case = with_bits;
    causal_case.bits = HostBitMask{};
    causal_case.spec.causal = true;
    run_cpu(with_bits, with_bits.args(Backend::CPU));
    run_cpu(causal_case, causal_case.args(Backend::CPU));
    expect_same_bits(with_bits, causal_case, "causal as bits vs causal");
  }
}

}  // namespace
}  // namespace fastattn::testing
