// Width of the causal schedule's L2 sections (sched/tile_order.cuh), chosen on the host.
//
// Plain longest-first order runs, at any moment, tiles of ~G different (batch, head) slots, each
// reading its own K/V: at s = 1k (b16 h16 d128) that is 66 MB of K/V in flight for a 50 MB L2, and
// every tile read its K/V from DRAM (causal ran as slow as non-causal, H100 2026-11-21). Sections
// of w slots, m-block outermost inside each, keep the K/V in flight to w slots. But the static
// schedule balances CTAs only where each pair of rounds sees sizes falling linearly, and section
// edges break that (up to 1.2x max/mean for some w). So the host simulates the schedule and takes
// the widest section that fits half the L2 and balances within 2% of the plain order; failing
// that, the widest up to the whole L2 that does; none: plain.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/sched/tile_order.cuh"

namespace fastattn::cuda_backend {

// Max over mean of the CTAs' work (keys seen by their tiles' rows, for an aligned causal mask)
// under the static schedule of `p` over `ctas` CTAs.
inline double schedule_imbalance(const FwdParams& p, int ctas, int block_rows) {
  std::vector<int64_t> load(size_t(ctas), 0);
  int64_t total = 0;
  const TileDivisors div = tile_divisors(p);
  const int64_t pad = std::max(p.first_block_pad, 0);  // varlen (-1): the simulation's lengths are nominal anyway
  for (int64_t r = 0; r * ctas < p.tiles; ++r) {
    for (int c = 0; c < ctas; ++c) {
      const int id = tile_of_round(int(r), c, ctas);
      if (id >= p.tiles) continue;
      const int64_t last_key =
          int64_t(tile_coord(p, div, id).m_block + 1) * block_rows - pad + (p.seqlen_k - p.seqlen_q);
      const int64_t keys = std::clamp<int64_t>(last_key, 0, p.seqlen_k);
      load[size_t(c)] += keys;
      total += keys;
    }
  }
  if (total == 0) return 1.0;
  return double(*std::max_element(load.begin(), load.end())) * ctas / double(total);
}

// p.section_slots for a causal launch over `ctas` CTAs (p.batch_heads when p is not heavy_first,
// when everything fits, or when no narrower section balances). Costs up to 32 schedule
// simulations of p.tiles steps each: callers cache it.
inline int choose_section_slots(FwdParams p, int ctas, int block_rows, int64_t kv_bytes_per_slot,
                                int64_t l2_bytes) {
  const int all = p.batch_heads;
  if (!p.heavy_first || all <= 1 || ctas <= 0) return std::max(all, 1);
  const int64_t fit = std::max<int64_t>(1, (l2_bytes / 2) / std::max<int64_t>(1, kv_bytes_per_slot));
  if (fit >= all) return all;
  p.section_slots = all;
  const double plain = schedule_imbalance(p, ctas, block_rows);
  // The widest balanced width in [lo, hi], trying at most 32; 0 if none.
  auto widest_balanced = [&](int64_t hi, int64_t lo) {
    for (int64_t w = hi, tried = 0; w >= lo && tried < 32; --w, ++tried) {
      p.section_slots = int(w);
      if (schedule_imbalance(p, ctas, block_rows) <= plain + 0.02) return int(w);
    }
    return 0;
  };
  if (const int w = widest_balanced(fit, 1)) return w;
  // None fits half the L2: up to twice that still cuts the re-reads, since a section's CTAs read
  // each slot's K/V as a moving window of blocks, not all at once. d128 s8k causal (fit 6, 11
  // balances): 3.6% faster than plain, H100 A/B 2026-11-21 (docs/notes/fwd-sm90.md, pass 13).
  // Searched second, so shapes that balance within half the L2 keep their width (a wider one
  // measured 3-10% slower at s <= 4k).
  if (const int w = widest_balanced(std::min<int64_t>(all - 1, 2 * fit), fit + 1)) return w;
  return all;
}

}  // namespace fastattn::cuda_backend
