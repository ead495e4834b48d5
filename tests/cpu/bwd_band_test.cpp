// The recompute band's plan (src/cuda/sm90/bwd/band.h) on the host: the bands partition the key
// blocks, every q-block with a visitor has exactly one owning band, and an owning band's key blocks
// plus its halo hold every key that a row of the q-block keeps (so its dQ is whole in one CTA),
// checked against every kept (row, key) pair of random windows, lengths and band widths.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/band.h"
#include "support/test_rng.h"

namespace fastattn::sm90 {
namespace {

using cuda_backend::WindowMask;
constexpr int kN = 128, kM = 64;  // the d 128 tile: key blocks of 128, q-blocks of 64

// bwd_q_block_visitors (dq_ring.h; the ring's visit count is its length): exactly the key blocks whose
// q-block range holds m.
TEST(BwdBand, VisitorsAreTheKeyBlocksThatWorkOnTheQBlock) {
  testing::Rng rng(testing::test_seed());
  for (int c = 0; c < 300; ++c) {
    const int len_q = rng.uniform_int(1, 2000), len_k = rng.uniform_int(1, 2000);
    const WindowMask mask{len_k, len_k - len_q, rng.uniform_int(0, 600), rng.uniform_int(0, 200)};
    for (int m = 0; m < (len_q + kM - 1) / kM; ++m) {
      int first, end;
      bwd_q_block_visitors(mask, m, kN, kM, first, end);
      for (int n = 0; n < (len_k + kN - 1) / kN; ++n) {
        const cuda_backend::BlockRange r = bwd_key_block_q_blocks(mask, n, kN, kM);
        ASSERT_EQ(n >= first && n < end, !r.empty() && m >= r.begin && m < r.end) << testing::seed_note(rng.seed());
      }
    }
  }
}

// The target (64, 0) at s 8192: band j of 4 owns q-blocks [8 j, 8 j + 8) and a 64-key halo.
TEST(BwdBand, TargetShape) {
  const WindowMask mask{8192, 0, 64, 0};
  for (int j = 0; j < 16; ++j) {
    int first, end, begin, stop;
    bwd_band_blocks(j, 4, 64, first, end);
    bwd_band_owned_q_blocks(mask, first, end, 128, kN, kM, begin, stop);
    EXPECT_EQ(begin, 8 * j);
    EXPECT_EQ(stop, 8 * j + 8);
    EXPECT_EQ(kN * first - bwd_band_halo_begin(mask, begin, kN * first, kM), j == 0 ? 0 : 64);
  }
}

TEST(BwdBand, OwnersPartitionAndHaloCoversEveryKeptKey) {
  testing::Rng rng(testing::test_seed());
  for (int c = 0; c < 400; ++c) {
    const int len_q = rng.uniform_int(1, 1500), len_k = rng.uniform_int(1, 1500);
    const int left = rng.uniform_int(0, 3) == 0 ? rng.uniform_int(0, 700) : rng.uniform_int(0, 64);
    const int right = rng.uniform_int(0, 2) == 0 ? rng.uniform_int(0, 200) : 0;
    const int band = rng.uniform_int(1, 9);
    const WindowMask mask{len_k, len_k - len_q, left, right};
    const int n_blocks = (len_k + kN - 1) / kN, m_blocks = (len_q + kM - 1) / kM;
    SCOPED_TRACE("len_q " + std::to_string(len_q) + " len_k " + std::to_string(len_k) + " window (" +
                 std::to_string(left) + ", " + std::to_string(right) + ") band " + std::to_string(band) + "; " +
                 testing::seed_note(rng.seed()));
    std::vector<int> owner(size_t(m_blocks), -1);
    int prev_stop = 0, blocks_seen = 0;
    for (int j = 0; j * band < n_blocks; ++j) {
      int first, end, begin, stop;
      bwd_band_blocks(j, band, n_blocks, first, end);
      ASSERT_EQ(first, blocks_seen);
      blocks_seen = end;
      bwd_band_owned_q_blocks(mask, first, end, m_blocks, kN, kM, begin, stop);
      ASSERT_LE(begin, stop);
      if (begin < stop) {
        ASSERT_GE(begin, prev_stop) << "owned runs rise and do not overlap";
        prev_stop = stop;
      }
      const int halo = bwd_band_halo_begin(mask, begin, kN * first, kM);
      ASSERT_LE(halo, kN * first);
      for (int m = begin; m < stop; ++m) {
        int vf, ve;
        bwd_q_block_visitors(mask, m, kN, kM, vf, ve);
        if (ve <= vf) continue;  // no kept key: no owner
        ASSERT_EQ(owner[size_t(m)], -1) << "q-block " << m << " owned twice";
        owner[size_t(m)] = j;
        ASSERT_TRUE(ve - 1 >= first && ve - 1 < end) << "q-block " << m << ": its highest visitor in the band";
        // Every key a row of the q-block keeps: in the band's blocks or its halo.
        for (int i = m * kM; i < (m + 1) * kM && i < len_q; ++i)
          for (int k = mask.lo(i); k < mask.hi(i); ++k)
            ASSERT_TRUE(k >= halo && k < kN * end) << "row " << i << " key " << k << ": outside band and halo";
      }
    }
    ASSERT_EQ(blocks_seen, n_blocks);
    for (int m = 0; m < m_blocks; ++m) {
      int vf, ve;
      bwd_q_block_visitors(mask, m, kN, kM, vf, ve);
      ASSERT_EQ(owner[size_t(m)] >= 0, ve > vf) << "q-block " << m << ": owned iff visited";
    }
  }
}


// The band kernel's walk (band_kernel.cuh), replayed on the host with the kernel's own functions:
// per band, the halo block's steps then each key block's, q-blocks rising with the heads inner, each
// step's dQ job (bwd_band_jobs) and slot (bwd_band_slot). Over random lengths (s_q != s_k), windows
// (right 0, 0 < left <= 64), bands and GQA groups: every (key block, q-block, head) pair of the mask
// adds to dK / dV exactly once; every visited (q-block, head) is stored exactly once, with exactly its
// visitors' dQ, by the band the plan names its owner (bwd_band_owned_q_blocks), and none is stored
// that no block visits; a hold finds its slot free and a resume finds its own partial there; a global
// slot lies in the CTA's spill run; nothing is left held at a band's end (no dQ crosses CTAs).
TEST(BwdBand, KernelWalkSumsEveryDqOnceInItsOwnSlots) {
  testing::Rng rng(testing::test_seed());
  for (int c = 0; c < 400; ++c) {
    const int len_q = rng.uniform_int(1, 1500), len_k = rng.uniform_int(1, 1500);
    const int left = rng.uniform_int(0, 3) == 0 ? kBwdBandMaxLeft : rng.uniform_int(1, kBwdBandMaxLeft);
    const int band = rng.uniform_int(1, 9), g = rng.uniform_int(1, 4);
    const WindowMask mask{len_k, len_k - len_q, left, 0};
    const int n_blocks = (len_k + kN - 1) / kN, m_blocks = (len_q + kM - 1) / kM;
    SCOPED_TRACE("len_q " + std::to_string(len_q) + " len_k " + std::to_string(len_k) + " left " +
                 std::to_string(left) + " band " + std::to_string(band) + " group " + std::to_string(g) + "; " +
                 testing::seed_note(rng.seed()));
    std::vector<int> dkdv(size_t(n_blocks) * m_blocks * g, 0), stored(size_t(m_blocks) * g, 0);
    std::vector<std::vector<int>> summed(size_t(m_blocks) * g);
    for (int j = 0; j * band < n_blocks; ++j) {
      int first, end;
      bwd_band_blocks(j, band, n_blocks, first, end);
      const cuda_backend::BlockRange halo = bwd_band_halo_q_blocks(mask, first, kN, kM);
      const int begin = first > 0 && !halo.empty() ? first - 1 : first;
      // The plan's owners (bwd_band_owned_q_blocks): the q-blocks this band's walk must store.
      int owned_begin, owned_stop;
      bwd_band_owned_q_blocks(mask, first, end, m_blocks, kN, kM, owned_begin, owned_stop);
      struct Held { int m = -1, h = -1; std::vector<int> from; };
      std::vector<Held> slots(size_t(2 * g));
      for (int k = begin; k < end; ++k) {
        const cuda_backend::BlockRange r = k < first ? halo : bwd_key_block_q_blocks(mask, k, kN, kM);
        const BwdBandJobs jobs = bwd_band_jobs(mask, k, first, end, kN, kM);
        for (int m = r.begin; m < r.end; ++m)
          for (int h = 0; h < g; ++h) {
            if (k >= first) ++dkdv[(size_t(k) * m_blocks + m) * g + h];
            const int job = jobs.job(m), s = bwd_band_slot(m, h, g);
            ASSERT_TRUE(s >= 0 && s < 2 * g);
            // Slots past the two smem buffers index the CTA's run of bwd_band_spill_slots(g) in the
            // workspace (band_dq.cuh: spill_run = CTA x spill_slots + s - 2): within it.
            if (s >= 2) {
              ASSERT_LT(s - 2, bwd_band_spill_slots(g)) << "slot " << s << " past the CTA's spill run";
            }
            Held& slot = slots[size_t(s)];
            if (job == kBandDqNone) {
              ASSERT_EQ(k, end - 1) << "only the band's top block leaves a q-block to the band above";
            } else if (job == kBandDqHold) {
              ASSERT_EQ(slot.m, -1) << "block " << k << " q-block " << m << ": slot " << s << " still held";
              slot.m = m;
              slot.h = h;
              slot.from = {k};
            } else {
              std::vector<int> from;
              if (job == kBandDqResume) {
                ASSERT_TRUE(slot.m == m && slot.h == h) << "block " << k << " q-block " << m << ": not its partial";
                from = slot.from;
                slot = Held{};
              }
              from.push_back(k);
              ASSERT_TRUE(m >= owned_begin && m < owned_stop) << "q-block " << m << " stored by band " << j
                                                              << ", not its owner (bwd_band_owned_q_blocks)";
              ++stored[size_t(m) * g + h];
              summed[size_t(m) * g + h] = from;
            }
          }
      }
      for (const Held& s : slots) ASSERT_EQ(s.m, -1) << "a partial left held at the band's end";
    }
    for (int m = 0; m < m_blocks; ++m) {
      int vf, ve;
      bwd_q_block_visitors(mask, m, kN, kM, vf, ve);
      std::vector<int> want;
      for (int k = vf; k < ve; ++k) want.push_back(k);
      for (int h = 0; h < g; ++h) {
        ASSERT_EQ(stored[size_t(m) * g + h], ve > vf ? 1 : 0) << "q-block " << m;
        if (ve > vf) {
          ASSERT_EQ(summed[size_t(m) * g + h], want) << "q-block " << m << ": its visitors' dQ";
        }
      }
      for (int k = 0; k < n_blocks; ++k) {
        const cuda_backend::BlockRange r = bwd_key_block_q_blocks(mask, k, kN, kM);
        const int want_dkdv = !r.empty() && m >= r.begin && m < r.end ? 1 : 0;
        for (int h = 0; h < g; ++h)
          ASSERT_EQ(dkdv[(size_t(k) * m_blocks + m) * g + h], want_dkdv) << "block " << k << " q-block " << m;
      }
    }
  }
}

// The host rule: d 128, default mode, no softcap, right = 0, 0 < left <= 64, dq pairs aligned; the
// wanted width (FASTATTN_BWD_BAND) passes through, 0 or less turns the band off.
TEST(BwdBand, Rule) {
  EXPECT_TRUE(bwd_band_serves(128, 64, 0, 0.f, true));
  EXPECT_TRUE(bwd_band_serves(128, 1, 0, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(64, 64, 0, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 65, 0, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 0, 0, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, -1, 0, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 64, 1, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 64, -1, 0.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 64, 0, 30.f, true));
  EXPECT_FALSE(bwd_band_serves(128, 64, 0, 0.f, false));
  EXPECT_EQ(bwd_band_spill_slots(1), 0);
  EXPECT_EQ(bwd_band_spill_slots(4), 6);
}

}  // namespace

TEST(BwdBand, WidthFillsTheSms) {
  // The measured shapes (H100, 132 SMs): (units, key blocks) -> the width that was fastest.
  EXPECT_EQ(bwd_band_width(64, 32, 132), 16);  // b2 h16 s8k (4: 6 % slower, 8: 3 %)
  EXPECT_EQ(bwd_band_width(32, 32, 132), 8);   // b2 h16 s4k (4: 4 %, 16: 50 % slower)
  EXPECT_EQ(bwd_band_width(64, 16, 132), 8);   // b1 h16 s8k (16: 50 % slower)
  EXPECT_EQ(bwd_band_width(64, 4, 132), 2);    // b2 h16/2 s8k: 128 bands
  for (int n : {1, 2, 17, 63, 64, 65, 1000})
    for (int64_t units : {1, 3, 32, 4096}) {
      const int b = bwd_band_width(n, units, 132);
      EXPECT_GE(b, 1);
      EXPECT_LE(b, std::min(n, 64));
    }
}


}  // namespace fastattn::sm90
