// The persistent forward's tile order (sched/tile_order.cuh) and the host's choice of causal
// section width (sched/l2_sections.h), on the host: every order visits every tile once, the
// causal order runs longest first inside each section, and the chosen width balances the CTAs.
// GQA head packing (sched/gqa_pack.h): the rule, and that the packed tiles and their row maps
// cover every (batch, q head, query position) once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/l2_sections.h"
#include "cuda/sched/tile_space.h"
#include "launch_shape.h"
#include "support/test_rng.h"

namespace fastattn::cuda_backend {
namespace {

int choose_section_slots(Launch p, int ctas, int rows, int64_t kv, int64_t l2) {
  p.s.tile_rows = rows;
  return choose_section_slots(p.s, p.a, p.a.window_right >= 0, ctas, kv, l2);
}

double schedule_imbalance(Launch p, int ctas, int rows) {
  p.s.tile_rows = rows;
  return schedule_imbalance(p.s, p.a, p.a.window_right >= 0, ctas);
}

Launch shape(int batch, int heads_q, int heads_kv, int m_blocks, bool causal, int section) {
  Launch p;
  p.a.batch = batch;
  p.a.heads_q = heads_q;
  p.a.heads_kv = heads_kv;
  p.a.q_per_kv = heads_q / heads_kv;
  p.s.m_blocks = m_blocks;
  p.s.head_slots = heads_q;
  p.s.batch_heads = batch * heads_q;
  p.s.tiles = m_blocks * p.s.batch_heads;
  p.s.heavy_first = causal ? 1 : 0;
  p.a.window_right = causal ? 0 : -1;
  p.s.section_slots = section;
  p.a.seqlen_q = p.a.seqlen_k = m_blocks * 128;
  return p;
}

TEST(TileOrder, EveryTileOnceInEveryOrder) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 400; ++trial) {
    const int heads_kv = rng.uniform_int(1, 4), heads_q = heads_kv * rng.uniform_int(1, 4);
    const int batch = rng.uniform_int(1, 5), m_blocks = rng.uniform_int(1, 17);
    const bool causal = rng.uniform_int(0, 1) == 1;
    const int section = rng.uniform_int(1, batch * heads_q);
    const Launch p = shape(batch, heads_q, heads_kv, m_blocks, causal, section);
    std::vector<int> seen(size_t(p.s.tiles), 0);
    int prev_section = -1, prev_m = 0;
    for (int id = 0; id < p.s.tiles; ++id) {
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
  const Launch p = shape(16, 16, 16, 8, true, 0);
  const int64_t kv = 1024 * 256 * 2, l2 = 50 << 20;
  const int w = choose_section_slots(p, 132, 128, kv, l2);
  EXPECT_LT(w, p.s.batch_heads);
  EXPECT_LE(w * kv, l2 / 2);
  Launch plain = p, chosen = p;
  plain.s.section_slots = p.s.batch_heads;
  chosen.s.section_slots = w;
  EXPECT_LE(schedule_imbalance(chosen, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02);
}

TEST(CausalSections, UpToTheWholeL2WhenNoHalfL2WidthBalances) {
  // b2 h16 d128 s8192: 4 MB of K/V per slot, 6 fit half of 50 MB and none of widths 1-6 balances.
  const Launch p = shape(2, 16, 16, 64, true, 0);
  const int64_t kv = 8192 * 256 * 2, l2 = 50 << 20;
  const int w = choose_section_slots(p, 132, 128, kv, l2);
  EXPECT_GT(w * kv, l2 / 2);
  EXPECT_LE(w * kv, l2);
  Launch plain = p, chosen = p;
  plain.s.section_slots = p.s.batch_heads;
  chosen.s.section_slots = w;
  EXPECT_LE(schedule_imbalance(chosen, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02);
}

TEST(CausalSections, NarrowestBalancedUpToTwiceTheL2WhenNothingNearerBalances) {
  // b4 h16 d256 s16384: 16 MB of K/V per slot, one fits half of 50 MB, none of widths 1-2 balances;
  // the plain order would keep all 64 slots in flight.
  const Launch p = shape(4, 16, 16, 128, true, 0);
  const int64_t kv = 16384 * 512 * 2, l2 = 50 << 20;
  const int w = choose_section_slots(p, 132, 128, kv, l2);
  const int fit = int(l2 / 2 / kv);
  EXPECT_LT(w, p.s.batch_heads);
  EXPECT_GT(w, 2 * fit);  // past the second search's range
  EXPECT_LE(w, 4 * fit);
  Launch plain = p, chosen = p;
  plain.s.section_slots = p.s.batch_heads;
  chosen.s.section_slots = w;
  EXPECT_LE(schedule_imbalance(chosen, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02);
  // Narrowest: no narrower width balances.
  for (int x = 1; x < w; ++x) {
    Launch narrower = p;
    narrower.s.section_slots = x;
    EXPECT_GT(schedule_imbalance(narrower, 132, 128), schedule_imbalance(plain, 132, 128) + 0.02) << x;
  }
}

TEST(CausalSections, PlainOrderWhenAllFitsOrNotCausal) {
  Launch p = shape(2, 16, 16, 64, true, 0);
  EXPECT_EQ(choose_section_slots(p, 132, 128, 1 << 20, 64 << 20), p.s.batch_heads);  // 32 MB fits
  p.s.heavy_first = 0;
  EXPECT_EQ(choose_section_slots(p, 132, 128, 64 << 20, 50 << 20), p.s.batch_heads);
}

TEST(CausalSections, ChosenWidthNeverWorseThanPlainByMoreThanTwoPercent) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 60; ++trial) {
    const int heads = rng.uniform_int(1, 32), batch = rng.uniform_int(1, 16), m_blocks = rng.uniform_int(1, 64);
    const int ctas = rng.uniform_int(1, 132);
    Launch p = shape(batch, heads, heads, m_blocks, true, 0);
    const int64_t kv = int64_t(m_blocks) * 128 * 256 * 2;
    const int w = choose_section_slots(p, ctas, 128, kv, 50 << 20);
    ASSERT_GE(w, 1);
    ASSERT_LE(w, p.s.batch_heads);
    Launch plain = p;
    plain.s.section_slots = p.s.batch_heads;
    p.s.section_slots = w;
    EXPECT_LE(schedule_imbalance(p, ctas, 128), schedule_imbalance(plain, ctas, 128) + 0.02 + 1e-12)
        << "trial " << trial;
  }
}

// Unmasked d = 64 (192-row tiles) at b = 16k / s, h = 32, 132 CTAs, 50 MB of L2: the partial
// m-block leaves warpgroups idle, so its tile is light.
Launch unmasked_d64(int s) {
  Launch p;
  p.a.batch = 16384 / s;
  p.a.heads_q = p.a.heads_kv = 32;
  p.a.q_per_kv = 1;
  p.a.seqlen_q = p.a.seqlen_k = s;
  p.s.tiles = int(set_tile_space(p, false, 192));
  return p;
}

TEST(UnmaskedSections, LightTilesLastWhereThatBalancesBetter) {
  for (int s : {1024, 2048, 4096}) {
    Launch p = unmasked_d64(s);
    ASSERT_EQ(p.s.heavy_first, 1) << s;
    ASSERT_EQ(p.s.first_block_pad, p.s.m_blocks * 192 - s) << s;
    const int64_t kv = int64_t(s) * 128 * 2;
    const int w = choose_section_slots(p, 132, 192, kv, 50 << 20);
    ASSERT_GE(w, 1) << s;
    EXPECT_LE(w * kv, 25 << 20) << s;  // half the L2
    Launch inner = p;
    inner.s.heavy_first = 0;
    inner.s.first_block_pad = 0;
    p.s.section_slots = w;
    // s = 1k: 1.115 -> 1.027, 4k: 1.053 -> 1.031 (max over mean CTA work)
    EXPECT_LT(schedule_imbalance(p, 132, 192), schedule_imbalance(inner, 132, 192) - 0.005) << s;
    // The light (first) m-block of each slot comes after its others.
    std::vector<int> last_full(size_t(p.s.batch_heads), -1), light(size_t(p.s.batch_heads), -1);
    for (int id = 0; id < p.s.tiles; ++id) {
      const TileCoord c = tile_coord(p, id);
      const size_t slot = size_t(c.batch * p.a.heads_q + c.head);
      (c.m_block == 0 ? light[slot] : last_full[slot]) = id;
    }
    for (size_t i = 0; i < light.size(); ++i) ASSERT_GT(light[i], last_full[i]) << s << " slot " << i;
  }
}

TEST(UnmaskedSections, DefaultOrderWhereSectionsDoNotHelp) {
  for (int s : {8192, 16384}) {  // the tail is one whole tile either way
    const Launch p = unmasked_d64(s);
    ASSERT_EQ(p.s.heavy_first, 1) << s;
    EXPECT_EQ(choose_section_slots(p, 132, 192, int64_t(s) * 256, 50 << 20), 0) << s;
  }
  Launch p = unmasked_d64(4032);  // 21 whole m-blocks: no padding, the default order
  EXPECT_EQ(p.s.heavy_first, 0);
  EXPECT_EQ(p.s.first_block_pad, 0);
}

TEST(GqaPack, Rule) {
  for (bool varlen : {false, true})
    for (int q_per_kv = 1; q_per_kv <= 40; ++q_per_kv)
      for (int sq = 0; sq <= 130; ++sq) {
        const GqaPack g = choose_gqa_pack(q_per_kv, sq, varlen);
        const bool want = !varlen && q_per_kv > 1 && sq >= 1 && sq <= 64;
        ASSERT_EQ(g.rows > 0, want) << q_per_kv << " " << sq << " " << varlen;
        if (!want) continue;
        const int r = g.rows;
        EXPECT_EQ(r & (r - 1), 0) << "R a power of two";
        EXPECT_GE(r, sq);
        EXPECT_LT(r / 2, sq) << "the smallest such power";
        EXPECT_GE(g.heads, 2);
        EXPECT_LE(g.heads * r, kPackTileRows);
        EXPECT_GE(g.groups * g.heads, q_per_kv);
        EXPECT_LT((g.groups - 1) * g.heads, q_per_kv) << "no empty group";
        EXPECT_EQ(g.groups, (q_per_kv + kPackTileRows / r - 1) / (kPackTileRows / r)) << "fewest groups";
      }
  auto rule = [](int q_per_kv, int sq) {
    const GqaPack g = choose_gqa_pack(q_per_kv, sq, false);
    return std::vector<int>{g.rows, g.heads, g.groups};
  };
  EXPECT_EQ(rule(8, 1), (std::vector<int>{1, 8, 1}));
  EXPECT_EQ(rule(6, 17), (std::vector<int>{32, 3, 2}));  // balanced 3 + 3, not 4 + 2
  EXPECT_EQ(rule(5, 20), (std::vector<int>{32, 3, 2}));  // 3 + 2
  EXPECT_EQ(rule(8, 64), (std::vector<int>{64, 2, 4}));
  EXPECT_EQ(rule(7, 3), (std::vector<int>{4, 7, 1}));
  EXPECT_EQ(rule(8, 65)[0], 0);
}

// Unpacked launches keep the old tile space; packed ones walk (batch, kv head, group) slots of one
// m-block, and rows g * R + i of a tile cover every (batch, q head, position < s_q) exactly once.
TEST(GqaPack, TilesAndRowMapsCoverEveryRowOnce) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    Launch p;
    p.a.batch = rng.uniform_int(1, 4);
    p.a.heads_kv = rng.uniform_int(1, 4);
    p.a.q_per_kv = rng.uniform_int(1, 12);
    p.a.heads_q = p.a.heads_kv * p.a.q_per_kv;
    p.a.seqlen_q = rng.uniform_int(1, rng.uniform_int(0, 2) > 0 ? 64 : 200);  // mostly packed
    p.a.seqlen_k = rng.uniform_int(1, 300);
    const bool causal = rng.uniform_int(0, 1) == 1;
    p.a.window_right = causal ? 0 : -1;
    const int64_t tiles = set_tile_space(p, false);
    p.s.tiles = int(tiles);
    p.s.section_slots = p.s.batch_heads;
    const std::string at = "trial " + std::to_string(trial) + " sq " + std::to_string(p.a.seqlen_q) + " q_per_kv " +
                           std::to_string(p.a.q_per_kv);
    if (p.s.pack_rows == 0) {
      ASSERT_EQ(p.s.m_blocks, (p.a.seqlen_q + 127) / 128) << at;
      ASSERT_EQ(tiles, int64_t(p.s.m_blocks) * p.a.heads_q * p.a.batch) << at;
      // Longest first: causal, or unmasked with a whole idle warpgroup (64 rows) of padding.
      const int pad128 = p.s.m_blocks * 128 - p.a.seqlen_q;
      const bool heavy128 = causal || pad128 >= 64;
      ASSERT_EQ(p.s.heavy_first, heavy128 ? 1 : 0) << at;
      // The rows that round s_q up to whole m-blocks pad the first m-block (its m0 is -pad), so
      // the last ends at row s_q; varlen leaves the count to each sequence (-1), and is longest
      // first only when causal.
      ASSERT_EQ(p.s.first_block_pad, heavy128 ? pad128 : 0) << at;
      ASSERT_LT(p.s.first_block_pad, 128) << at;
      set_tile_space(p, true);
      ASSERT_EQ(p.s.heavy_first, causal ? 1 : 0) << at;
      ASSERT_EQ(p.s.first_block_pad, causal ? -1 : 0) << at;
      // The same tile space on 192-row tiles (three consumer warpgroups): only the m-blocks change.
      // An unpacked tile row r is position m0 + r, also for r in [128, 192).
      const int64_t tiles192 = set_tile_space(p, false, 192);
      ASSERT_EQ(p.s.m_blocks, (p.a.seqlen_q + 191) / 192) << at;
      ASSERT_EQ(tiles192, int64_t(p.s.m_blocks) * p.a.heads_q * p.a.batch) << at;
      ASSERT_EQ(p.s.pack_rows, 0) << at;
      const int pad192 = p.s.m_blocks * 192 - p.a.seqlen_q;
      const bool heavy192 = causal || pad192 >= 64;
      ASSERT_EQ(p.s.heavy_first, heavy192 ? 1 : 0) << at;
      ASSERT_EQ(p.s.first_block_pad, heavy192 ? pad192 : 0) << at;
      for (int t = 0; t < 192; ++t) ASSERT_EQ((t & p.s.row_pos_mask) + (t >> p.s.row_head_shift), t) << at;
      continue;
    }
    ASSERT_EQ(p.s.heavy_first, 0) << at;
    ASSERT_EQ(p.s.first_block_pad, 0) << at;
    const int r = p.s.pack_rows;
    std::vector<int> seen(size_t(p.a.batch * p.a.heads_q * p.a.seqlen_q), 0);
    for (int id = 0; id < p.s.tiles; ++id) {
      const TileCoord c = tile_coord(p, id);
      ASSERT_EQ(c.m_block, 0) << at;
      ASSERT_EQ(c.kv_head, c.head / p.a.q_per_kv) << at;
      const int heads = std::min(p.s.pack_heads, (c.kv_head + 1) * p.a.q_per_kv - c.head);  // as store_rows
      ASSERT_GE(heads, 1) << at;
      for (int t = 0; t < kPackTileRows; ++t) {
        const int pos = t & p.s.row_pos_mask, g = t >> p.s.row_head_shift;
        ASSERT_EQ(g * r + pos, t) << at;
        // The mask's second row of a thread (tile rows t and t + 8 with t % 16 < 8).
        if (t % 16 < 8) {
          ASSERT_EQ((t + 8) & p.s.row_pos_mask, pos + p.s.row8_step) << at << " row " << t;
        }
        if (pos >= p.a.seqlen_q || g >= heads) continue;
        ++seen[size_t((c.batch * p.a.heads_q + c.head + g) * p.a.seqlen_q + pos)];
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << at << " row " << i;
  }
}

}  // namespace
}  // namespace fastattn::cuda_backend
