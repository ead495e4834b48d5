// The kernels' mask (cuda/mask/window_mask.cuh) and block source (cuda/mask/block_source.cuh) on
// the host, against the mask oracle (src/reference/mask_oracle.h): every kept pair of a tile lies
// in a visited block, every block called full keeps every pair, and the walk visits each block of
// the range once, last first. Row view (forward: key blocks of a query tile) and column view
// (backward: query blocks of a key tile); the block-sparse list walk (BlockList) over both views.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/mask/block_list_build.h"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/mask_class.h"
#include "cuda/mask/window_mask.cuh"
#include "reference/mask_oracle.h"
#include "support/test_rng.h"

namespace fastattn::cuda_backend {
namespace {

using reference::keep;
using reference::MaskRule;

// A random mask: odd sizes, every class (none, causal, local, narrow local, left-only windows).
MaskRule random_rule(fastattn::testing::Rng& rng) {
  static const int kLens[] = {1, 17, 64, 113, 128, 200, 257};
  MaskRule m;
  m.len_q = rng.uniform_int(0, 2) == 0 ? kLens[rng.uniform_int(0, 6)] : rng.uniform_int(1, 300);
  m.len_k = rng.uniform_int(0, 2) == 0 ? kLens[rng.uniform_int(0, 6)] : rng.uniform_int(1, 300);
  const int kind = rng.uniform_int(0, 4);
  m.window_left = kind >= 2 ? rng.uniform_int(0, 150) : -1;
  m.window_right = kind == 0 || kind == 4 ? -1 : kind == 1 ? rng.uniform_int(0, 1) * rng.uniform_int(0, 40)
                                                           : rng.uniform_int(0, 150);
  return m;
}

WindowMask window_of(const MaskRule& m) { return {m.len_k, m.len_k - m.len_q, m.window_left, m.window_right}; }

std::string describe(const MaskRule& m) {
  return "len_q " + std::to_string(m.len_q) + " len_k " + std::to_string(m.len_k) + " window (" +
         std::to_string(m.window_left) + ", " + std::to_string(m.window_right) + ")";
}

// The positions of a range's walk, in order.
std::vector<int> walk(const BlockRange& r) {
  std::vector<int> out;
  for (int it = r.first(); !r.done(it); it = r.next(it)) {
    out.push_back(it);
    EXPECT_EQ(r.has_next(it), it != r.last());
    EXPECT_EQ(r.is_last(it), it == r.last());
  }
  return out;
}

void check_walk(const BlockRange& r, const std::string& at) {
  const std::vector<int> w = walk(r);
  ASSERT_EQ(int(w.size()), std::max(0, r.count())) << at;
  for (size_t k = 0; k < w.size(); ++k) ASSERT_EQ(r.block(w[k]), r.end - 1 - int(k)) << at << " last first";
  // The plain run: from the first position down to full_run_end every block below full_end is full.
  for (bool keep_last : {false, true}) {
    const int lo = r.full_run_end(keep_last);
    ASSERT_GE(lo, r.begin + (keep_last ? 1 : 0)) << at;
    for (int it : w)
      if (it >= lo && !r.above_full(it)) { ASSERT_TRUE(r.full(it)) << at << " block " << it; }
  }
}

// Whether the rows [i0, i1) x keys [j0, j1) hold a kept pair, and whether all are kept (and in range).
struct Kept {
  bool any = false, all = true;
};
Kept kept(const MaskRule& m, int i0, int i1, int j0, int j1) {
  Kept k;
  k.all = i1 <= m.len_q && j1 <= m.len_k;
  for (int i = i0; i < i1; ++i)
    for (int j = j0; j < j1; ++j) {
      const bool x = keep(m, i, j);
      k.any |= x;
      k.all &= x;
    }
  return k;
}

TEST(WindowMask, RowRangesAreTheOracles) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const WindowMask w = window_of(m);
    for (int i = 0; i < m.len_q; ++i)
      for (int j = 0; j < m.len_k; ++j)
        ASSERT_EQ(keep(m, i, j), j >= w.lo(i) && j < w.hi(i)) << describe(m) << " row " << i << " key " << j;
  }
}

TEST(BlockSource, KeyBlocksOfAQueryTile) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  static const int kTileN[] = {64, 80, 128, 176, 192};
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const int tile_m = rng.uniform_int(0, 1) ? 128 : 192, tile_n = kTileN[rng.uniform_int(0, 4)];
    const int pad = rng.uniform_int(0, 1) ? rng.uniform_int(0, tile_m - 1) : 0;  // first_block_pad
    for (int m0 = -pad; m0 < m.len_q; m0 += tile_m) {
      const int m1 = std::min(m0 + tile_m, m.len_q);
      const BlockRange r = key_blocks(window_of(m), m0, m1, tile_n);
      const std::string at = describe(m) + " rows [" + std::to_string(m0) + ", " + std::to_string(m1) +
                             ") tile_n " + std::to_string(tile_n);
      for (int n = 0; n * tile_n < m.len_k; ++n) {
        const auto [any, all] = kept(m, std::max(m0, 0), m1, n * tile_n, (n + 1) * tile_n);
        if (any) { ASSERT_TRUE(n >= r.begin && n < r.end) << at << " block " << n << " has kept pairs"; }
        if (r.full(n)) { ASSERT_TRUE(all) << at << " block " << n << " called full"; }
      }
      check_walk(r, at);
    }
  }
}

// Split-KV shares (split_share): over random masks and tiles, the shares of 1..40 splits walk
// every block of the tile's range exactly once, each a contiguous run whose size differs
// from the others' by at most one block (shares past the block count are empty), with the full
// range unchanged.
TEST(BlockSource, SplitSharesPartitionTheKeyBlocks) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const int m1 = std::min(rng.uniform_int(1, 128), m.len_q), tile_n = rng.uniform_int(0, 1) ? 64 : 128;
    const BlockRange r = key_blocks(window_of(m), 0, m1, tile_n);
    const int splits = rng.uniform_int(1, 40);
    const std::string at = describe(m) + " rows [0, " + std::to_string(m1) + ") splits " + std::to_string(splits);
    std::vector<int> seen;
    int least = 1 << 30, most = 0;
    for (int s = 0; s < splits; ++s) {
      const BlockRange p = split_share(r, s, splits);
      ASSERT_EQ(p.full_begin, r.full_begin) << at;
      ASSERT_EQ(p.full_end, r.full_end) << at;
      const int n = p.empty() ? 0 : p.count();
      least = std::min(least, n);
      most = std::max(most, n);
      for (int it = p.first(); !p.done(it); it = p.next(it)) seen.push_back(p.block(it));
    }
    std::vector<int> want;
    for (int b = r.begin; b < r.end; ++b) want.push_back(b);
    std::sort(seen.begin(), seen.end());
    ASSERT_EQ(seen, want) << at;
    if (!r.empty()) {
      ASSERT_LE(most - least, 1) << at;
    }
  }
}

// Block-sparse lists (BlockList, as sm90/block_lists.cu builds them): over random masks, 128 x 128
// tiles and random kept sets of a row, the list walk visits exactly the kept blocks of the tile's
// window range, last first, and at each position full / above_full say what the window range says
// of its block; the plain run (full_run_end) holds only full positions and stops above the walk's
// last one when asked to. The row's list sits at a nonzero base of a larger array, as in the kernel.
TEST(BlockSource, BlockListWalksTheKeptBlocks) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const int n_blocks = (m.len_k + 127) / 128, base = rng.uniform_int(0, 3) * n_blocks;
    const int density_pct = rng.uniform_int(0, 4) * 25;  // 0, 25, 50, 75, 100
    std::vector<int> list(size_t(base + n_blocks), -1);
    std::vector<char> kept_block(static_cast<size_t>(n_blocks));
    int filled = 0;
    for (int n = 0; n < n_blocks; ++n) {
      kept_block[size_t(n)] = rng.uniform_int(0, 99) < density_pct;
      if (kept_block[size_t(n)]) list[size_t(base + filled++)] = n;
    }
    for (int m0 = 0; m0 < m.len_q; m0 += 128) {
      const int m1 = std::min(m0 + 128, m.len_q);
      const BlockRange r = key_blocks(window_of(m), m0, m1, 128);
      const std::string at = describe(m) + " rows [" + std::to_string(m0) + ", " + std::to_string(m1) + ") density " +
                             std::to_string(density_pct);
      int edge[4], below[4] = {0, 0, 0, 0};
      block_list_edges(r, edge);
      for (int i = 0; i < 4; ++i)
        for (int n = 0; n < edge[i]; ++n) below[i] += n < n_blocks && kept_block[size_t(n)];
      const BlockList l = block_list_at(list.data(), base, below);
      std::vector<int> want, got;
      for (int n = r.end - 1; n >= r.begin; --n)
        if (n < n_blocks && kept_block[size_t(n)]) want.push_back(n);
      for (const int it : walk(l)) {
        got.push_back(l.block(it));
        ASSERT_EQ(l.full(it), r.full(l.block(it))) << at << " position " << it;
        ASSERT_EQ(l.above_full(it), r.above_full(l.block(it))) << at << " position " << it;
      }
      ASSERT_EQ(got, want) << at;
      ASSERT_EQ(l.empty(), want.empty()) << at;
      for (bool keep_last : {false, true}) {
        const int lo = l.full_run_end(keep_last);
        ASSERT_GE(lo, l.begin + (keep_last ? 1 : 0)) << at;
        for (int it = lo; it < l.end && !l.above_full(it); ++it) ASSERT_TRUE(l.full(it)) << at << " position " << it;
      }
    }
  }
}

// The backward's lists (sm90/bwd/block_lists.h): the same BlockList over the column view, a key tile's
// kept q-blocks (of 64 or 128 rows) inside its query_blocks range, with the same edges and counts as
// bwd_block_lists_kernel takes them. The walk visits exactly those, last first, and full / above_full
// say what the window range says of each block.
TEST(BlockSource, BlockListWalksTheKeptQueryBlocks) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const WindowMask w = window_of(m);
    const int tile_m = rng.uniform_int(0, 1) ? 64 : 128;
    const int m_blocks = (m.len_q + tile_m - 1) / tile_m, base = rng.uniform_int(0, 3) * m_blocks;
    const int density_pct = rng.uniform_int(0, 4) * 25;
    std::vector<int> list(size_t(base + m_blocks), -1);
    std::vector<char> kept_block(static_cast<size_t>(m_blocks));
    int filled = 0;
    for (int q = 0; q < m_blocks; ++q) {
      kept_block[size_t(q)] = rng.uniform_int(0, 99) < density_pct;
      if (kept_block[size_t(q)]) list[size_t(base + filled++)] = q;
    }
    for (int n0 = 0; n0 < m.len_k; n0 += 128) {
      const BlockRange r = query_blocks(w, n0, n0 + 128, tile_m);
      const std::string at = describe(m) + " keys [" + std::to_string(n0) + ", +128) q-blocks of " +
                             std::to_string(tile_m) + " density " + std::to_string(density_pct);
      int edge[4], below[4] = {0, 0, 0, 0};
      block_list_edges(r, edge);
      for (int i = 0; i < 4; ++i) {
        ASSERT_LE(edge[i], m_blocks) << at;  // the kernel's line holds m_blocks entries
        for (int q = 0; q < edge[i]; ++q) below[i] += kept_block[size_t(q)];
      }
      const BlockList l = block_list_at(list.data(), base, below);
      std::vector<int> want, got;
      for (int q = r.end - 1; q >= r.begin; --q)
        if (kept_block[size_t(q)]) want.push_back(q);
      for (const int it : walk(l)) {
        got.push_back(l.block(it));
        ASSERT_EQ(l.full(it), r.full(l.block(it))) << at << " position " << it;
        ASSERT_EQ(l.above_full(it), r.above_full(l.block(it))) << at << " position " << it;
      }
      ASSERT_EQ(got, want) << at;
      ASSERT_EQ(l.empty(), want.empty()) << at;
    }
  }
}

// The column view: WindowMask's rows of key j, [row_lo(j), row_hi(j)), against the oracle (none
// for a key past len_k), then query_blocks over key tiles as the backward cuts them: tile_n keys
// from n0 whatever len_k, so a sequence's last tile runs past its end (its keys there are masked,
// so no block of it may be called full).
TEST(BlockSource, QueryBlocksOfAKeyTile) {
  fastattn::testing::Rng rng(fastattn::testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const MaskRule m = random_rule(rng);
    const WindowMask w = window_of(m);
    ASSERT_EQ(w.len_q(), m.len_q) << describe(m);
    for (int j = 0; j < m.len_k + 3; ++j)
      for (int i = 0; i < m.len_q; ++i)
        ASSERT_EQ(keep(m, i, j), i >= w.row_lo(j) && i < w.row_hi(j)) << describe(m) << " key " << j << " row " << i;
    const int tile_n = rng.uniform_int(0, 1) ? 128 : 80, tile_m = rng.uniform_int(0, 1) ? 64 : 128;
    for (int n0 = 0; n0 < m.len_k + tile_n; n0 += tile_n) {  // one tile wholly past len_k too
      const int n1 = n0 + tile_n;
      const BlockRange r = query_blocks(w, n0, n1, tile_m);
      const std::string at = describe(m) + " keys [" + std::to_string(n0) + ", " + std::to_string(n1) + ")";
      if (n0 >= m.len_k) { ASSERT_TRUE(r.empty()) << at << " past the keys"; }
      for (int mb = 0; mb * tile_m < m.len_q; ++mb) {
        const auto [any, all] = kept(m, mb * tile_m, (mb + 1) * tile_m, n0, n1);
        if (any) { ASSERT_TRUE(mb >= r.begin && mb < r.end) << at << " q-block " << mb << " has kept pairs"; }
        if (r.full(mb)) { ASSERT_TRUE(all) << at << " q-block " << mb << " called full"; }
      }
      check_walk(r, at);
    }
  }
}

TEST(MaskClass, OneClassPerWindow) {
  EXPECT_EQ(classify_mask(-1, -1), MaskClass::None);
  EXPECT_EQ(classify_mask(-1, 0), MaskClass::Causal);
  EXPECT_EQ(classify_mask(-1, 7), MaskClass::Causal);  // right edge only: work grows with the m-block
  EXPECT_EQ(classify_mask(64, 0), MaskClass::NarrowLocal);
  EXPECT_EQ(classify_mask(32, 32), MaskClass::NarrowLocal);
  EXPECT_EQ(classify_mask(33, 32), MaskClass::Local);
  EXPECT_EQ(classify_mask(256, 0), MaskClass::Local);
  EXPECT_EQ(classify_mask(0, -1), MaskClass::Local);  // left edge only
}

}  // namespace
}  // namespace fastattn::cuda_backend
