// The persistent forward's tile order (sched/tile_order.cuh) and the host's choice of causal
// section width (sched/causal_sections.h), on the host: every order visits every tile once, the
// causal order runs longest first inside each section, and the chosen width balances the CTAs.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/sched/causal_sections.h"
#include "support/test_rng.h"

namespace fastattn::cuda_backend {
namespace {

FwdParams shape(int batch, int heads_q, int heads_kv, int m_blocks, bool causal, int section) {
  FwdParams p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.q_per_kv = heads_q / heads_kv;
  p.m_blocks = m_blocks;
  p.batch_heads = batch * heads_q;
  p.tiles = m_blocks * p.batch_heads;
  p.heavy_first = causal ? 1 : 0;
  p.section_slots = section;
  p.seqlen_q = p.seqlen_k = m_blocks * 128;
  return p;
}

TEST(TileOrder, EveryTileOnceInEveryOrder) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 400; ++trial) {
    const int heads_kv = rng.uniform_int(1, 4), heads_q = heads_kv * rng.uniform_int(1, 4);
    const int batch = rng.uniform_int(1, 5), m_blocks = rng.uniform_int(1, 17);
    const bool causal = rng.uniform_int(0, 1) == 1;
    const int section = rng.uniform_int(1, batch * heads_q);
    const FwdParams p = shape(batch, heads_q, heads_kv, m_blocks, causal, section);
    std::vector<int> seen(size_t(p.tiles), 0);
    int prev_section = -1, prev_m = 0;
    for (int id = 0; id < p.tiles; ++id) {
      const TileCoord c = tile_coord(p, id);
      ASSERT_TRUE(c.batch >= 0 && c.batch < batch && c.head >= 0 && c.head < heads_q && c.m_block >= 0 &&
                  c.m_block < m_blocks)
          << "trial " << trial << " id " << id;
      ++seen[size_t((c.batch * heads_q + c.head) * m_blocks + c.m_block)];
      if (causal) {  // inside a section, m-blocks never grow
        const int sec = id / (section * m_blocks);
        if (sec == prev_section) {
          EXPECT_LE(c.m_block, prev_m) << "trial " << trial << " id " << id;
        }
        prev_section = sec;
        prev_m = c.m_block;
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "trial " << trial << " tile " << i;
  }
}

TEST(TileOrder, RoundsCoverEveryIdOnce) {
  for (int ctas : {1, 3, 132}) {
    for (int tiles : {1, 131, 132, 133, 1000}) {
      std::vector<int> seen(size_t(tiles), 0);
      for (int r = 0; r * ctas < tiles; ++r)
        for (int c = 0; c < ctas; ++c)
          if (const int id = tile_of_round(r, c, ctas); id < tiles) ++seen[size_t(id)];
      for (int n : seen) ASSERT_EQ(n, 1) << ctas << " CTAs, " << tiles << " tiles";
    }
  }
}

TEST(CausalSections, NarrowSectionWhenKvOverflowsL2AndBalanced) {
  // b16 h16 d128 s1024 on 132 SMs with 50 MB of L2: 256 slots of 512 KB K/V do not fit.
  const FwdParams p = shape(16, 16, 16, 8, true, 0);
  const int64_t kv = 1024 * 256 * 2, l2 = 50 << 20;
  const int w = choose_section_slots(p, 132, 128, kv, l2);
  EXPECT_LT(w, p.batch_heads);
  EXPECT_LE(w * kv, l2 / 2);
  FwdParams plain = p, chosen = p;
  plain.section_slots = p.batch_heads;
  chosen.section_slots = w;
  EXPECT_LE(schedule_imbalance(chosen, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02);
}

TEST(CausalSections, UpToTheWholeL2WhenNoHalfL2WidthBalances) {
  // b2 h16 d128 s8192: 4 MB of K/V per slot, 6 fit half of 50 MB and none of widths 1-6 balances.
  const FwdParams p = shape(2, 16, 16, 64, true, 0);
  const int64_t kv = 8192 * 256 * 2, l2 = 50 << 20;
  const int w = choose_section_slots(p, 132, 128, kv, l2);
  EXPECT_GT(w * kv, l2 / 2);
  EXPECT_LE(w * kv, l2);
  FwdParams plain = p, chosen = p;
  plain.section_slots = p.batch_heads;
  chosen.section_slots = w;
  EXPECT_LE(schedule_imbalance(chosen, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02);
}

TEST(CausalSections, PlainOrderWhenAllFitsOrNotCausal) {
  FwdParams p = shape(2, 16, 16, 64, true, 0);
  EXPECT_EQ(choose_section_slots(p, 132, 128, 1 << 20, 64 << 20), p.batch_heads);  // 32 MB fits
  p.heavy_first = 0;
  EXPECT_EQ(choose_section_slots(p, 132, 128, 64 << 20, 50 << 20), p.batch_heads);
}

TEST(CausalSections, ChosenWidthNeverWorseThanPlainByMoreThanTwoPercent) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 60; ++trial) {
    const int heads = rng.uniform_int(1, 32), batch = rng.uniform_int(1, 16), m_blocks = rng.uniform_int(1, 64);
    const int ctas = rng.uniform_int(1, 132);
    FwdParams p = shape(batch, heads, heads, m_blocks, true, 0);
    const int64_t kv = int64_t(m_blocks) * 128 * 256 * 2;
    const int w = choose_section_slots(p, ctas, 128, kv, 50 << 20);
    ASSERT_GE(w, 1);
    ASSERT_LE(w, p.batch_heads);
    FwdParams plain = p;
    plain.section_slots = p.batch_heads;
    p.section_slots = w;
    EXPECT_LE(schedule_imbalance(p, ctas, 128), schedule_imbalance(plain, ctas, 128) + 0.02 + 1e-12)
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace fastattn::cuda_backend
