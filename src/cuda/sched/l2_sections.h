// Width of the longest-first schedule's L2 sections (sched/tile_order.cuh), chosen on the host.
//
// Plain longest-first order runs, at any moment, tiles of ~G different (batch, head) slots, each
// reading its own K/V: at s = 1k (b16 h16 d128) that is 66 MB of K/V in flight for a 50 MB L2, and
// every tile read its K/V from DRAM (causal ran as slow as non-causal). Sections
// of w slots, m-block outermost inside each, keep the K/V in flight to w slots. But the static
// schedule balances CTAs only where each pair of rounds sees sizes falling linearly, and section
// edges break that (up to 1.2x max/mean for some w). So the host simulates the schedule and takes
// the widest section that fits half the L2 and balances within 2% of the plain order; failing
// that, the widest up to the whole L2 that does; failing that, the narrowest up to twice the L2
// that does; none: plain.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/common/attn_params.h"
#include "cuda/sched/tile_order.cuh"

namespace fastattn::cuda_backend {

// A tile's modeled time relative to a full one when only `live` of its `wgs` 64-row warpgroups
// have rows: the kernel skips the others' GEMMs (sm90/fwd/mainloop.cuh, idle tiles), and a
// warpgroup alone runs its QK latency plus its softmax per block instead of sharing the tensor
// cores: about half a full block at d = 64 (QK ~256 + softmax ~550 cycles against 3 x 512).
constexpr double kLoneWarpgroupShare = 0.55;
inline double live_share(int live, int wgs) {
  return std::max(double(live) / double(wgs), live < wgs ? kLoneWarpgroupShare : 1.0);
}

// Max over mean of the CTAs' work under the static schedule `s` of problem `a` over `ctas` CTAs:
// per tile, the keys its last row sees (all of them unless causal; an aligned causal mask) times
// its share of working warpgroups (live_share; padding rows are first_block_pad's, fixed length).
inline double schedule_imbalance(const TileSchedule& s, const AttnParams& a, bool causal, int ctas) {
  std::vector<double> load(size_t(ctas), 0.0);
  double total = 0;
  const TileDivisors div = tile_divisors(s, a.heads_kv);
  const int64_t pad = std::max(s.first_block_pad, 0);  // varlen (-1): the simulation's lengths are nominal anyway
  const int block_rows = s.tile_rows;
  const int wgs = std::max(1, block_rows / 64);
  for (int64_t r = 0; r * ctas < s.tiles; ++r) {
    for (int c = 0; c < ctas; ++c) {
      const int id = tile_of_round(int(r), c, ctas);
      if (id >= s.tiles) continue;
      const int64_t m0 = int64_t(tile_coord(s, div, a, id).m_block) * block_rows - pad;
      const int64_t last_key = m0 + block_rows + (a.seqlen_k - a.seqlen_q);
      const int64_t keys = causal ? std::clamp<int64_t>(last_key, 0, a.seqlen_k) : a.seqlen_k;
      // warpgroups holding a row of [0, seqlen_q)
      const int64_t lo = std::max<int64_t>(m0, 0), hi = std::min<int64_t>(m0 + block_rows, a.seqlen_q);
      const int live = hi > lo ? int((hi - 1 - m0) / 64 - (lo - m0) / 64 + 1) : 0;
      const double work = double(keys) * live_share(live, wgs);
      load[size_t(c)] += work;
      total += work;
    }
  }
  if (total == 0) return 1.0;
  return *std::max_element(load.begin(), load.end()) * ctas / total;
}

// The section width of the longest-first schedule `s` (heavy_first set, tile space final) of problem
// `a` over `ctas` CTAs: s.batch_heads when s is not heavy_first, when everything fits, or when no
// narrower section balances. Costs up to 97 schedule simulations (three searches of 32 and the
// plain order's) of s.tiles steps each: callers cache it.
//
// Unmasked (heavy_first for a light first m-block, cuda/launch_plan.cpp): the sections must fit half
// the L2 (every tile of a slot reads all its K/V, and the order without sections reads ~G slots'
// K/V at once: d = 64 s = 4k, 132 MB); the most balanced width there (the widest of equals), or 0
// when none beats the default order (m-block innermost, padding last) by 0.5%: the caller then
// drops the longest-first order (d = 64 s = 8k, 16k: the tail is a whole tile either way).
inline int choose_section_slots(TileSchedule s, const AttnParams& a, bool causal, int ctas,
                                int64_t kv_bytes_per_slot, int64_t l2_bytes) {
  const int all = s.batch_heads;
  if (!s.heavy_first || all <= 1 || ctas <= 0) return std::max(all, 1);
  const int64_t fit = std::max<int64_t>(1, (l2_bytes / 2) / std::max<int64_t>(1, kv_bytes_per_slot));
  if (!causal) {
    TileSchedule inner = s;
    inner.heavy_first = 0;
    inner.first_block_pad = 0;
    const double base = schedule_imbalance(inner, a, causal, ctas);
    int best_w = 0;
    double best = base - 0.005;
    const int64_t hi = std::min<int64_t>(fit, all);
    for (int64_t w = hi; w >= std::max<int64_t>(1, hi - 31); --w) {
      s.section_slots = int(w);
      const double imb = schedule_imbalance(s, a, causal, ctas);
      if (imb < best - 1e-9) {
        best = imb;
        best_w = int(w);
      }
    }
    return best_w;
  }
  if (fit >= all) return all;
  s.section_slots = all;
  const double plain = schedule_imbalance(s, a, causal, ctas);
  // The widest balanced width in [lo, hi], trying at most 32; 0 if none.
  auto widest_balanced = [&](int64_t hi, int64_t lo) {
    for (int64_t w = hi, tried = 0; w >= lo && tried < 32; --w, ++tried) {
      s.section_slots = int(w);
      if (schedule_imbalance(s, a, causal, ctas) <= plain + 0.02) return int(w);
    }
    return 0;
  };
  if (const int w = widest_balanced(fit, 1)) return w;
  // None fits half the L2: up to twice that still cuts the re-reads, since a section's CTAs read
  // each slot's K/V as a moving window of blocks, not all at once (d128 s8k causal, fit 6, 11
  // balances: 3.6% faster than plain; docs/notes/fwd-sm90.md).
  // Searched second, so shapes that balance within half the L2 keep their width (a wider one
  // measured 3-10% slower at s <= 4k).
  if (const int w = widest_balanced(std::min<int64_t>(all - 1, 2 * fit), fit + 1)) return w;
  // Still none (large slots, fit 1-5: d >= 192 at s >= 8k): the narrowest balanced width up to
  // four fits. It overflows the L2, but the plain order keeps every slot's K/V in flight, which
  // thrashes it far worse once there are 32+ slots (d256 s16k causal b4 h16: 1.6x slower than
  // 3 slots a section; docs/notes/fwd-sm90.md, session 34).
  for (int64_t w = 2 * fit + 1, tried = 0; w <= std::min<int64_t>(4 * fit, all - 1) && tried < 32; ++w, ++tried) {
    s.section_slots = int(w);
    if (schedule_imbalance(s, a, causal, ctas) <= plain + 0.02) return int(w);
  }
  return all;
}

}  // namespace fastattn::cuda_backend
