// The backward's L2-resident dQ ring (src/cuda/sm90/bwd/dq_ring.h) on the host: the host rule (which
// problems take the ring), the per-q-block visit counts against a count over every key block's
// q-blocks, the positions one to one, and the order argument the ring's deadlock freedom rests
// on: under the longest-first ticket order, every key block of the q-block R positions back starts
// before any key block of the q-block itself, and the whole protocol (counts, waits, slots, frees)
// under random schedules of resident CTAs finishes with no slot shared (random windows, lengths,
// GQA, sections, varlen).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/dq_layout.h"
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/lpt_order.h"
#include "support/test_rng.h"

namespace fastattn::sm90 {
namespace {

using cuda_backend::WindowMask;

int blocks_of(int len, int size) { return (len + size - 1) / size; }

TEST(BwdDqRing, HostRule) {
  const int s8k = bwd_lpt_section(2 * 16, 1, 8192, 128, kBwdLptL2Bytes);
  // The target: window (64, 0), b 2, h 16, s 8192, d 128.
  EXPECT_EQ(bwd_ring_lag(64, 0, 128, 64), 4);
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, true, 32, 1, 128, s8k), kBwdRingSlots);
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, true, 32, 1, 128, s8k, 1), 16) << "the lag's minimum, 4 x 4 x 1";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, true, 32, 1, 128, s8k, 100), 128) << "a power of two";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 64, true, 32, 1, 128, s8k), kBwdRingSlots);
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 0, 0, true, 1, 1, 1, 1), kBwdRingSlots) << "slots past the positions are not held";
  EXPECT_EQ(bwd_ring_slots_held(kBwdRingSlots, 1), 1);
  // The accumulator path: deterministic, other head dims, a missing edge (causal, one-edged), wide
  // windows, dq not pair-aligned, no positions, a lag wider than the ring.
  EXPECT_EQ(bwd_dq_ring_slots(128, true, 64, 0, true, 32, 1, 128, s8k), 0);
  for (int d : {64, 96, 192, 256}) EXPECT_EQ(bwd_dq_ring_slots(d, false, 64, 0, true, 32, 1, 128, s8k), 0) << d;
  EXPECT_EQ(bwd_dq_ring_slots(128, false, -1, 0, true, 32, 1, 128, s8k), 0) << "causal";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, -1, true, 32, 1, 128, s8k), 0) << "no right edge";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, -1, -1, true, 32, 1, 128, s8k), 0) << "no mask";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 1000, 25, true, 32, 1, 128, s8k), 0) << "wider than kBwdRingMaxWindow";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, false, 32, 1, 128, s8k), 0) << "dq not pair-aligned";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, true, 0, 1, 128, s8k), 0) << "no positions";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 64, 0, true, 6, 3, 16, 2), 0) << "a group of 3: R no multiple of it";
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 1000, 0, true, 8, 8, 64, 8), 0) << "lag 19 x 8 x 8 > 512 slots";
  // Edges whose sum passes INT32_MAX are wide, not narrow (the sum wrapped negative once).
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 1 << 30, 1 << 30, true, 1, 2, 512, 1), 0);
  EXPECT_EQ(bwd_dq_ring_slots(128, false, INT32_MAX, 1, true, 1, 2, 512, 1), 0);
  EXPECT_EQ(bwd_dq_ring_slots(128, false, 1, INT32_MAX, true, 1, 2, 512, 1), 0);
}

// The host's default (session 35's A/B): the ring for left = 0, right <= 64 at GQA groups up to 4 only; the
// band serves right = 0 with 0 < left <= 64, the accumulator path everything else.
TEST(BwdDqRing, DefaultWindows) {
  for (int right : {0, 1, 17, 64})
    for (int group : {1, 2, 4}) EXPECT_TRUE(bwd_ring_by_default(0, right, group)) << right << " " << group;
  EXPECT_FALSE(bwd_ring_by_default(0, 64, 8));
  EXPECT_FALSE(bwd_ring_by_default(0, 0, 16));
  for (auto [l, r] : {std::pair{0, 65}, std::pair{0, 128}, std::pair{64, 0}, std::pair{1, 0}, std::pair{64, 64},
                      std::pair{16, 16}, std::pair{1, 1}, std::pair{100, 50}, std::pair{1000, 24}, std::pair{-1, 0},
                      std::pair{0, -1}})
    EXPECT_FALSE(bwd_ring_by_default(l, r, 1)) << l << ", " << r;
}

// The visit count of every q-block equals the number of key blocks whose q-blocks (the kernel's
// tile function) hold it, counted over every key block.
TEST(BwdDqRing, VisitsCountEveryKeyBlock) {
  testing::Rng rng(2027);
  static const int kLens[] = {0, 1, 17, 64, 113, 128, 300, 4097};
  for (int trial = 0; trial < 400; ++trial) {
    const int len_q = trial < 64 ? kLens[trial % 8] : rng.uniform_int(0, 1200);
    const int len_k = trial < 64 ? kLens[trial / 8] : rng.uniform_int(0, 1200);
    const int left = rng.uniform_int(0, 3) == 0 ? -1 : rng.uniform_int(0, 400);
    const int right = rng.uniform_int(0, 3) == 0 ? -1 : rng.uniform_int(0, 400);
    const WindowMask mask{len_k, len_k - len_q, left, right};
    SCOPED_TRACE("len_q " + std::to_string(len_q) + " len_k " + std::to_string(len_k) + " window (" +
                 std::to_string(left) + ", " + std::to_string(right) + ")");
    std::vector<int> count(size_t(blocks_of(std::max(len_q, 1), 64)) + 2, 0);
    for (int n = 0; n < blocks_of(len_k, 128); ++n) {
      const cuda_backend::BlockRange r = bwd_key_block_q_blocks(mask, n, 128, 64);
      for (int m = r.begin; m < r.end; ++m) ++count[size_t(m)];
    }
    for (int m = 0; m < int(count.size()); ++m) ASSERT_EQ(bwd_q_block_visits(mask, m, 128, 64), count[size_t(m)]) << m;
  }
}

// One to one, below bwd_ring_positions, and a narrow last section's units where a full one's would be.
TEST(BwdDqRing, PositionsOneToOne) {
  for (int units : {1, 3, 6, 32})
    for (int q_per_kv : {1, 4})
      for (int section : {1, 2, 4, 8}) {
        if (section > units) continue;
        const int heads_kv = units % 2 == 0 ? 2 : 1, batch = units / heads_kv, m_blocks = 5;
        std::vector<int> seen(size_t(bwd_ring_positions(units, q_per_kv, m_blocks, section)), 0);
        for (int b = 0; b < batch; ++b)
          for (int h = 0; h < heads_kv * q_per_kv; ++h)
            for (int m = 0; m < m_blocks; ++m) {
              const int64_t at = bwd_ring_position(b, h, m, heads_kv, q_per_kv, m_blocks, section);
              ASSERT_GE(at, 0);
              ASSERT_LT(at, int64_t(seen.size()));
              ++seen[size_t(at)];
            }
        int used = 0;
        for (int n : seen) {
          ASSERT_LE(n, 1) << "units " << units << " q_per_kv " << q_per_kv << " section " << section;
          used += n;
        }
        ASSERT_EQ(used, units * m_blocks * q_per_kv);
      }
}

// The store loop (dq.cuh, store_dq_rows) walks float4 128 j + u of a 64 x 128 run as columns e.col + 8 j
// of the rows of float4 u.
TEST(BwdDqRing, RunColumnsStepByEight) {
  for (int u = 0; u < 128; ++u) {
    const DqPairs e = dq_accum_pairs(u, 64);
    for (int j = 0; j < 16; ++j) {
      const DqPairs f = dq_accum_pairs(128 * j + u, 64);
      ASSERT_EQ(f.row, e.row) << u << " " << j;
      ASSERT_EQ(f.col, e.col + 8 * j) << u << " " << j;
    }
  }
}

// The ticket order (lpt_order.h) over units of their own lengths (varlen: each unit its sequence),
// and for each ring position the first and last ticket of the key blocks that add into it: with R
// slots, position P may wait for position P - R, which must be done by CTAs that all started
// earlier, last(P - R) < first(P).
void check_order(const std::vector<int>& len_q, const std::vector<int>& len_k, int heads_kv, int q_per_kv, int left,
                 int right, int section, int slots) {
  const int batch = int(len_q.size()), units = batch * heads_kv;
  const int max_q = *std::max_element(len_q.begin(), len_q.end()), max_k = *std::max_element(len_k.begin(), len_k.end());
  const int m_blocks = blocks_of(max_q, 64), n_blocks = blocks_of(max_k, 128);
  const int64_t positions = bwd_ring_positions(units, q_per_kv, m_blocks, section);
  std::vector<int> first(size_t(positions), -1), last(size_t(positions), -1), visits(size_t(positions), 0);
  for (int ticket = 0; ticket < units * n_blocks; ++ticket) {
    const int item = bwd_lpt_item(ticket, units, n_blocks, section), unit = item / n_blocks, n = item % n_blocks;
    const int b = unit / heads_kv, kv_head = unit % heads_kv;
    if (n * 128 >= len_k[size_t(b)]) continue;  // past the sequence's keys: the CTA exits
    const WindowMask mask{len_k[size_t(b)], len_k[size_t(b)] - len_q[size_t(b)], left, right};
    const cuda_backend::BlockRange r = bwd_key_block_q_blocks(mask, n, 128, 64);
    for (int h = kv_head * q_per_kv; h < (kv_head + 1) * q_per_kv; ++h)
      for (int m = r.begin; m < r.end; ++m) {
        const size_t at = size_t(bwd_ring_position(b, h, m, heads_kv, q_per_kv, m_blocks, section));
        if (first[at] < 0) first[at] = ticket;
        last[at] = ticket;
        ++visits[at];
      }
  }
  for (int b = 0; b < batch; ++b) {
    const WindowMask mask{len_k[size_t(b)], len_k[size_t(b)] - len_q[size_t(b)], left, right};
    for (int h = 0; h < heads_kv * q_per_kv; ++h)
      for (int m = 0; m < m_blocks; ++m) {
        const size_t at = size_t(bwd_ring_position(b, h, m, heads_kv, q_per_kv, m_blocks, section));
        ASSERT_EQ(visits[at], bwd_q_block_visits(mask, m, 128, 64)) << "the preprocess's count, position " << at;
      }
  }
  for (int64_t at = slots; at < positions; ++at) {
    const size_t prev = size_t(at - slots);
    if (visits[size_t(at)] == 0 || visits[prev] == 0) continue;
    ASSERT_LT(last[prev], first[size_t(at)]) << "position " << at << " waits on " << prev << " (R " << slots << ")";
  }
}

// The protocol under a schedule of up to `resident` CTAs at once, admitted in ticket order (a CTA
// takes its ticket when it starts), each step of a randomly chosen runnable CTA done whole: a
// q-block with one visitor stores at once; else the writer waits for bwd_ring_wait_target to be free,
// adds (the slot must then hold nothing or this q-block), counts, and the last add frees the slot.
// A CTA whose wait is not met is blocked; with work left and none runnable the grid would hang.
// Every position ends free, every slot empty. resident = 1 is the one-SM grid.
void run_protocol(const std::vector<int>& len_q, const std::vector<int>& len_k, int heads_kv, int q_per_kv, int left,
                  int right, int section, int slots, int resident, testing::Rng& rng) {
  const int batch = int(len_q.size()), units = batch * heads_kv;
  const int m_blocks = blocks_of(*std::max_element(len_q.begin(), len_q.end()), 64);
  const int n_blocks = blocks_of(*std::max_element(len_k.begin(), len_k.end()), 128);
  const int64_t positions = bwd_ring_positions(units, q_per_kv, m_blocks, section);
  // Positions of a narrow last section's missing units are never written (nor waited on): -1.
  std::vector<int> need(size_t(positions), -1), count(size_t(positions), -1), owner(size_t(slots), -1);
  auto mask_of = [&](int b) { return WindowMask{len_k[size_t(b)], len_k[size_t(b)] - len_q[size_t(b)], left, right}; };
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads_kv * q_per_kv; ++h)
      for (int m = 0; m < m_blocks; ++m) {  // the preprocess
        const size_t at = size_t(bwd_ring_position(b, h, m, heads_kv, q_per_kv, m_blocks, section));
        need[at] = bwd_q_block_visits(mask_of(b), m, 128, 64);
        count[at] = bwd_ring_initial_count(need[at]);
      }
  // Each CTA's steps (positions in the ring kernel's walk, kBwdRingWalk), by ticket.
  std::vector<std::vector<int>> steps;
  for (int ticket = 0; ticket < units * n_blocks; ++ticket) {
    const int item = bwd_lpt_item(ticket, units, n_blocks, section), unit = item / n_blocks, n = item % n_blocks;
    const int b = unit / heads_kv, kv_head = unit % heads_kv;
    std::vector<int> mine;
    const cuda_backend::BlockRange r = bwd_key_block_q_blocks(mask_of(b), n, 128, 64);
    if (n * 128 < len_k[size_t(b)] && !r.empty()) {
      int h, m;
      bwd_walk_first(kBwdRingWalk, kv_head * q_per_kv, r.begin, r.end, h, m);
      for (int i = 0; i < q_per_kv * r.count(); ++i) {
        mine.push_back(int(bwd_ring_position(b, h, m, heads_kv, q_per_kv, m_blocks, section)));
        bwd_walk_next(kBwdRingWalk, kv_head * q_per_kv, q_per_kv, r.begin, r.end, h, m);
      }
    }
    steps.push_back(mine);
  }
  auto need_of = [&](int i) { return need[size_t(i)]; };
  auto runnable = [&](int at) {
    if (need[size_t(at)] <= 1) return true;
    const int prev = bwd_ring_wait_target(at, slots, need_of);
    return prev < 0 || count[size_t(prev)] == bwd_ring_free_count(need[size_t(prev)]);
  };
  std::vector<std::pair<int, size_t>> live;  // (ticket, next step)
  int next_ticket = 0;
  for (;;) {
    while (int(live.size()) < resident && next_ticket < int(steps.size())) live.push_back({next_ticket++, 0});
    live.erase(std::remove_if(live.begin(), live.end(), [&](const auto& c) { return c.second == steps[size_t(c.first)].size(); }),
               live.end());
    if (live.empty() && next_ticket == int(steps.size())) break;
    if (int(live.size()) < resident && next_ticket < int(steps.size())) continue;
    std::vector<size_t> ready;
    for (size_t c = 0; c < live.size(); ++c)
      if (runnable(steps[size_t(live[c].first)][live[c].second])) ready.push_back(c);
    ASSERT_FALSE(ready.empty()) << "every resident CTA waits: the grid hangs (ticket " << live[0].first << ")";
    auto& cta = live[ready[size_t(rng.uniform_int(0, int(ready.size()) - 1))]];
    const int at = steps[size_t(cta.first)][cta.second++];
    const int nd = need[size_t(at)];
    ASSERT_GE(nd, 1) << "a visited q-block counted no visitor, position " << at;
    if (nd == 1) continue;
    const int slot = at & (slots - 1);
    ASSERT_TRUE(owner[size_t(slot)] < 0 || owner[size_t(slot)] == at)
        << "position " << at << " adds into slot " << slot << " while position " << owner[size_t(slot)] << " holds it";
    owner[size_t(slot)] = at;
    if (++count[size_t(at)] == nd) {
      count[size_t(at)] = bwd_ring_free_count(nd);
      owner[size_t(slot)] = -1;
    }
  }
  for (int64_t at = 0; at < positions; ++at) {
    if (need[size_t(at)] >= 0) {
      ASSERT_EQ(count[size_t(at)], bwd_ring_free_count(need[size_t(at)])) << "position " << at << " not done";
    }
  }
  for (int o : owner) ASSERT_EQ(o, -1);
}

TEST(BwdDqRing, SlotWaitsOnlyOnEarlierCtas) {
  testing::Rng rng(27);
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = rng.uniform_int(1, 4), heads_kv = rng.uniform_int(1, 3), q_per_kv = rng.uniform_int(0, 2) == 0 ? 4 : 1;
    const bool varlen = trial % 3 == 0;
    std::vector<int> len_q(static_cast<size_t>(batch)), len_k(static_cast<size_t>(batch));
    const int sq = rng.uniform_int(1, 1500), sk = trial % 4 == 1 ? sq : rng.uniform_int(1, 1500);
    for (int b = 0; b < batch; ++b) {
      len_q[size_t(b)] = varlen ? rng.uniform_int(0, sq) : sq;
      len_k[size_t(b)] = varlen ? rng.uniform_int(0, sk) : sk;
    }
    len_q[0] = sq;  // the max lengths set the block counts
    len_k[0] = sk;
    const int left = rng.uniform_int(0, 3) == 0 ? rng.uniform_int(0, 3) : rng.uniform_int(0, 400);
    const int right = rng.uniform_int(0, 2) == 0 ? 0 : rng.uniform_int(0, 300);
    const int units = batch * heads_kv;
    // A power of two up to the units (bwd_lpt_section's), also with a narrower last section.
    int section = 1 << rng.uniform_int(0, 3);
    while (section > units) section /= 2;
    const int lag_slots = bwd_ring_lag(left, right, 128, 64) * section * q_per_kv;
    SCOPED_TRACE("trial " + std::to_string(trial) + " window (" + std::to_string(left) + ", " + std::to_string(right) +
                 ") sq " + std::to_string(sq) + " sk " + std::to_string(sk) + " units " + std::to_string(units) +
                 " q_per_kv " + std::to_string(q_per_kv) + " section " + std::to_string(section));
    check_order(len_q, len_k, heads_kv, q_per_kv, left, right, section, lag_slots);  // the bound itself
    const int resident = 1 + rng.uniform_int(0, 1) * rng.uniform_int(1, 40);
    int pow2 = 1;  // the kernel's slot = position & (R - 1): the lag's minimum as a power of two
    while (pow2 < lag_slots) pow2 *= 2;
    run_protocol(len_q, len_k, heads_kv, q_per_kv, left, right, section, pow2, resident, rng);
    const int slots = bwd_dq_ring_slots(128, false, left, right, true, units, q_per_kv, blocks_of(sq, 64), section, 1);
    if (slots > 0) {
      check_order(len_q, len_k, heads_kv, q_per_kv, left, right, section, slots);
      run_protocol(len_q, len_k, heads_kv, q_per_kv, left, right, section, slots, resident, rng);
    }
  }
}

}  // namespace
}  // namespace fastattn::sm90
