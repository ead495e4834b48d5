// Block-sparse masks (MaskKind::BlockSparse) on the host: the oracle against the definition, the
// CPU backend's tile classes and partial-tile masking against the oracle, CPU forward and backward
// against the float64 reference (block_mask_cases.h), and the exact cases: no kept block gives
// out 0 / lse -inf / zero gradients, an all-kept mask equals no mask bit for bit, 1 x 1 blocks
// spelling out causal equal causal bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "api/validate.h"
#include "block_mask_cases.h"
#include "cpu/tile_class.h"
#include "cpu/tiling.h"
#include "cpu_check.h"
#include "fastattn/fastattn.h"
#include "reference/mask_oracle.h"

namespace fastattn::testing {
namespace {

// Entry (b, h, i / block_q, j / block_k) read from the test's own bytes by the type's rule.
bool blocks_keep(const AttnCase& c, int64_t b, int64_t h, int64_t i, int64_t j) {
  const BlockMask m = c.blocks.view_at();
  const int64_t mb = m.shape[0] == 1 ? 0 : b;
  const int64_t mh = h / (c.spec.heads_q / m.shape[1]);
  return m.data[mb * m.stride[0] + mh * m.stride[1] + (i / m.block_q) * m.stride[2] + (j / m.block_k) * m.stride[3]] != 0;
}

TEST(BlockMaskOracle, KeepIsWindowAndBlocks) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  for (const NamedCase& nc : block_mask_cases()) {
    if (nc.spec.seqlen_q > 1000) continue;  // the element loop below is O(s_q s_k)
    AttnCase c = make_case(nc.spec, rng);
    detail::Prepared prep;
    ASSERT_TRUE(detail::prepare_forward(c.args(Backend::CPU), &prep).ok()) << nc.name;
    const detail::Problem& p = prep.problem;
    const reference::MaskOracle oracle(p);
    for (int64_t b = 0; b < p.batch; ++b) {
      const detail::Sequence& s = p.seqs[size_t(b)];
      const reference::MaskRule rule = oracle.rule(b);
      for (int64_t h = 0; h < p.heads_q; ++h) {
        for (int64_t i = 0; i < s.rows_q; ++i) {
          for (int64_t j = 0; j < s.rows_k; ++j) {
            const bool want = reference::keep(rule, i, j) && blocks_keep(c, b, h, i, j);
            ASSERT_EQ(oracle.keep(b, h, i, j), want) << nc.name << " b " << b << " h " << h << " (" << i << ", "
                                                     << j << ") " << seed_note(seed);
          }
        }
      }
    }
  }
}

// A random (q_blocks x k_blocks) byte mask over one head, as a view.
struct OneHeadBlocks {
  std::vector<uint8_t> bytes;
  detail::BlockMaskView view;
};

OneHeadBlocks random_blocks(Rng& rng, int rows, int cols) {
  OneHeadBlocks o;
  o.view.block_q = rng.uniform_int(1, 20);
  o.view.block_k = rng.uniform_int(1, 20);
  o.view.q_blocks = (rows + o.view.block_q - 1) / o.view.block_q + 1;
  o.view.k_blocks = (cols + o.view.block_k - 1) / o.view.block_k + 1;
  const float density = rng.uniform(0.0f, 1.0f) < 0.2f ? 1.0f : rng.uniform(0.0f, 1.0f);
  for (int i = 0; i < o.view.q_blocks * o.view.k_blocks; ++i) o.bytes.push_back(rng.uniform(0.0f, 1.0f) < density);
  o.view.data = o.bytes.data();
  o.view.row_stride = o.view.k_blocks;
  o.view.col_stride = 1;
  return o;
}

TEST(BlockMaskTiles, ClassAndPartialMaskingMatchTheOracle) {
  const uint64_t seed = test_seed();
  Rng rng(seed);
  for (int trial = 0; trial < 4000; ++trial) {
    const reference::MaskRule rule{rng.uniform_int(0, 40), rng.uniform_int(0, 40), rng.uniform_int(-1, 12),
                                   rng.uniform_int(-1, 12)};
    const OneHeadBlocks blocks = random_blocks(rng, 40, 40);
    const reference::HeadMask m{rule, &blocks.view, 0, 0};
    const int i0 = rng.uniform_int(0, 40), j0 = rng.uniform_int(0, 40);
    const int rows = rng.uniform_int(1, 16), cols = rng.uniform_int(1, 16);
    ASSERT_NO_FATAL_FAILURE(check_tile_against_oracle(m, rule, i0, rows, j0, cols, seed_note(seed)));
  }
}

class CpuBlockMaskForward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBlockMaskForward, MatchesReference) { check_cpu_forward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBlockMaskForward, ::testing::ValuesIn(block_mask_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

class CpuBlockMaskBackward : public ::testing::TestWithParam<NamedCase> {};
TEST_P(CpuBlockMaskBackward, MatchesReference) { check_cpu_backward(GetParam().spec, GetParam().threads); }
INSTANTIATE_TEST_SUITE_P(Cases, CpuBlockMaskBackward, ::testing::ValuesIn(block_mask_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& p) { return p.param.name; });

TEST(CpuBlockMask, NoKeptBlockGivesZeroOutMinusInfLseZeroGradients) {
  Rng rng(test_seed());
  for (bool is_varlen : {false, true}) {
    CaseSpec spec = masked(shape(2, 33, 40, 2, 1, 16, 16, DType::F32), blk(8, 8, 0.0f, 2, true));
    if (is_varlen) spec = varlen(spec, {33, 0, 5}, {40, 7, 0});
    AttnCase c = make_case(spec, rng);
    run_cpu(c, c.args(Backend::CPU));
    for (const HostTensor* t : {&c.out, &c.dq, &c.dk, &c.dv}) {
      for (double x : t->to_f64()) ASSERT_EQ(x, 0.0);
    }
    for (double x : c.lse.to_f64()) ASSERT_EQ(x, -INFINITY);
  }
}

TEST(CpuBlockMask, AllKeptEqualsNoMaskBitForBit) {
  Rng rng(test_seed());
  const CaseSpec spec = masked(local(shape(2, 113, 90, 4, 2, 32, 32, DType::BF16), 30, 7), blk(16, 100, 1.0f, 2, true));
  AttnCase masked_case = make_case(spec, rng);
  AttnCase plain = masked_case;
  plain.blocks = HostBlockMask{};
  run_cpu(masked_case, masked_case.args(Backend::CPU));
  run_cpu(plain, plain.args(Backend::CPU));
  expect_same_bits(masked_case, plain, "all blocks kept vs no mask");
}

TEST(CpuBlockMask, UnitBlocksSpellingCausalEqualCausalBitForBit) {
  Rng rng(test_seed());
  for (auto [sq, sk] : {std::pair{70, 100}, std::pair{100, 70}}) {
    AttnCase with_blocks = make_case(masked(shape(1, sq, sk, 2, 1, 32, 32, DType::F32), blk(1, 1, 1.0f)), rng);
    for (int i = 0; i < sq; ++i) {
      for (int j = 0; j < sk; ++j) with_blocks.blocks.bytes[size_t(i * sk + j)] = j <= i + sk - sq;
    }
    AttnCase causal_case = with_blocks;
    causal_case.blocks = HostBlockMask{};
    causal_case.spec.causal = true;
    run_cpu(with_blocks, with_blocks.args(Backend::CPU));
    run_cpu(causal_case, causal_case.args(Backend::CPU));
    expect_same_bits(with_blocks, causal_case, "1 x 1 blocks of causal vs causal");
  }
}

}  // namespace
}  // namespace fastattn::testing
