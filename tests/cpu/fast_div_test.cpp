// FastDiv (common/fast_div.h) against plain division, and the tile order's coordinates with the
// launch's divisors (p.s.div, as the kernel reads them) against the plain-division order they replace.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/common/fast_div.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sched/tile_order.cuh"
#include "launch_shape.h"
#include "support/test_rng.h"

namespace fastattn::cuda_backend {
namespace {

void expect_divides(uint32_t d, uint32_t n) {
  const FastDiv f(d);
  ASSERT_EQ(f.div(n), n / d) << "n " << n << " d " << d;
  ASSERT_EQ(f.mod(n), n % d) << "n " << n << " d " << d;
}

// Every divisor up to 4097 and around each power of two up to 2^30, on numerators at the edges
// (0, multiples of d and their neighbours, 2^31 - 1) and drawn at random over [0, 2^31).
TEST(FastDiv, MatchesPlainDivision) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4097; ++d) divisors.push_back(d);
  for (int s = 12; s <= 30; ++s)
    for (int64_t delta = -2; delta <= 2; ++delta) divisors.push_back(uint32_t((int64_t(1) << s) + delta));
  for (int i = 0; i < 200; ++i) divisors.push_back(uint32_t(rng.uniform_int(1, INT32_MAX)));
  const uint32_t top = uint32_t(INT32_MAX);
  for (uint32_t d : divisors) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 2 * d, top, top - 1, top / d * d, top / d * d - 1})
      if (n <= top) expect_divides(d, n);
    for (int i = 0; i < 64; ++i) expect_divides(d, uint32_t(rng.uniform_int(0, INT32_MAX)));
  }
  FastDiv zero(0);  // treated as 1 (no tiles: never divided by)
  EXPECT_EQ(zero.div(7), 7u);
}

// The order as it was written with plain division (sessions 3-5); the fast one must match it tile
// for tile.
TileCoord plain_tile_coord(const Launch& p, int tile) {
  const unsigned id = unsigned(tile), m_blocks = unsigned(p.s.m_blocks);
  auto slot_tile = [&](unsigned batch_slot, unsigned m_block) {
    const unsigned heads = unsigned(p.s.head_slots), kv_heads = unsigned(p.a.heads_kv);
    const unsigned slot = batch_slot % heads, kv = slot % kv_heads;
    return TileCoord{int(batch_slot / heads), int(kv * unsigned(p.a.q_per_kv) + slot / kv_heads * unsigned(p.s.pack_heads)),
                     int(kv), int(m_block)};
  };
  if (p.s.heavy_first) {
    const unsigned width = unsigned(p.s.section_slots), per_section = width * m_blocks;
    const unsigned section = id / per_section, first = section * width, w = id - section * per_section;
    const unsigned n = std::min(width, unsigned(p.s.batch_heads) - first);
    return slot_tile(first + w % n, m_blocks - 1 - w / n);
  }
  return slot_tile(id / m_blocks, m_blocks - 1 - id % m_blocks);
}

TEST(FastDiv, TileOrderMatchesPlainDivision) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 500; ++trial) {
    // A launch's tile space (sched/gqa_pack.h), packed (s_q <= 64, GQA) or not, on 128- or 192-row
    // tiles, causal or not; causal ones with a random section width.
    Launch p;
    p.a.batch = rng.uniform_int(1, 9);
    p.a.heads_kv = rng.uniform_int(1, 9);
    p.a.q_per_kv = rng.uniform_int(1, 8);
    p.a.heads_q = p.a.heads_kv * p.a.q_per_kv;
    p.a.seqlen_q = p.a.seqlen_k = rng.uniform_int(1, rng.uniform_int(0, 1) ? 64 : 9000);
    p.a.window_right = rng.uniform_int(0, 1) ? 0 : -1;
    p.s.tiles = int(set_tile_space(p, false, rng.uniform_int(0, 1) ? 128 : 192));
    p.s.section_slots = p.s.heavy_first ? rng.uniform_int(1, p.s.batch_heads) : p.s.batch_heads;
    p.s.div = tile_divisors(p.s, p.a.heads_kv);  // as the launch sets it
    for (int id = 0; id < p.s.tiles; ++id) {
      const TileCoord a = tile_coord(p.s, p.s.div, p.a, id), b = plain_tile_coord(p, id);
      ASSERT_TRUE(a.batch == b.batch && a.head == b.head && a.kv_head == b.kv_head && a.m_block == b.m_block)
          << "trial " << trial << " id " << id << " section " << p.s.section_slots << " of " << p.s.batch_heads;
    }
  }
}

}  // namespace
}  // namespace fastattn::cuda_backend
