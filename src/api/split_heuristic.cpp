#include "api/split_heuristic.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fastattn::detail {
namespace {

constexpr double kFullEnough = 0.8;   // tiles >= 80 % of the SMs: splitting only adds the combine
constexpr double kNearBest = 0.85;    // accept the fewest splits within 85 % of the best efficiency
// Streaming K/V: CTAs that saturate HBM, and the fewest key blocks a split keeps (2 blocks of 128
// keys per split ran 1.2x slower than 4). A Hopper decode CTA (GQA-packed tile, d 128) streams
// ~72 GB/s, bound by its first warpgroup's GEMMs and softmax (its 4 rows leave the second idle:
// H200, b1 32k unsplit, 8 CTAs 580 GB/s; 50-56 GB/s while both warpgroups ran GEMMs, session 45),
// so a device needs its bandwidth / 72 GB/s CTAs: 67 on the H200 (4.81 TB/s), whose measured best
// counts at batch 1-8 sit at CTAs x rate ~0.96 x the bandwidth (session 47's sweep, as 64 CTAs at
// 50 GB/s on the H100 before); 46 on the H100 (3.35 TB/s; not yet measured with the idle warpgroup).
// Tiles whose rows fill both warpgroups (GQA 8 at s_q 16: 128 rows) keep the 50 GB/s measured with
// both at work. Unknown bandwidth: half the SMs.
constexpr double kStreamBytesPerCta = 72e9;
constexpr double kStreamBytesPerCtaBothWarpgroups = 50e9;
constexpr double kStreamingCtas = 0.5;
constexpr int64_t kMinStreamingBlocks = 4;
// Long streams whose rounded count fills half the SMs or fewer (H200 GQA 4 b4 or MHA b1: 32 tiles,
// 2 splits; b8 or MHA b2: 64 tiles, 1) take the count of one full wave (sms / tiles: 4, 2) where the
// longest sequence has at least this many key blocks. A half-filled grid read 2-9 % slower than the
// full wave at 8k-64k keys (b4 32k: 133.9 against 126.4 us), 7-19 % after another library's kernels
// (FA3's in the same process: the half-filled grid's SM placement); at 4k keys the two counts tied or
// the smaller won (b4 4k: 21.2 against 22.1 us) (H200, session 54, bench/results/2026-11-29-s54.md).
// Counts of 3 and more rounded stay (b1 / b2 GQA 4: 8 / 4 splits, the cluster merge's measured best).
// On the H100 (46 CTAs) the step takes GQA 4 (h_kv 8) b3 / b4 / b5 from 2 / 1 / 1 to 5 / 4 / 3 splits
// and b6-b8 from 1 to 2 (H200: b5 2 -> 3, b6-b8 1 -> 2): by the same reasoning, not measured there.
constexpr int64_t kLongStreamBlocks = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int32_t choose_num_splits(const SplitShape& s) {
  if (s.tiles <= 0 || s.key_blocks <= 1 || s.sms <= 0) return 1;
  if (s.streams_kv) {
    // Rounded to the nearest count where the bandwidth is known (H200 batch 8: 98 / 64 CTAs, 2 splits
    // ran 13 % under 1, session 47, before the idle second warpgroup), down where it is not; then the
    // long-stream step (kLongStreamBlocks).
    int64_t want = int64_t(kStreamingCtas * s.sms) / s.tiles;
    if (s.hbm_bytes_per_s > 0) {
      const double per_cta = s.one_warpgroup ? kStreamBytesPerCta : kStreamBytesPerCtaBothWarpgroups;
      want = std::llround(std::min<double>(s.hbm_bytes_per_s / per_cta, s.sms) / s.tiles);
      const int64_t full_wave = s.sms / s.tiles;
      if (want <= 2 && full_wave > want && s.key_blocks >= kLongStreamBlocks) want = full_wave;
    }
    return int32_t(std::max<int64_t>(1, std::min<int64_t>({want, s.max_splits, s.key_blocks / kMinStreamingBlocks})));
  }
  if (double(s.tiles) >= kFullEnough * s.sms) return 1;
  const int64_t most = std::min<int64_t>({s.max_splits, s.sms, s.key_blocks});
  // A count that leaves the blocks per split as the count below it does adds CTAs for nothing.
  auto useful = [&](int64_t n) { return n == 1 || ceil_div(s.key_blocks, n) != ceil_div(s.key_blocks, n - 1); };
  // Efficiency of n splits: the machine's occupancy over the waves the launch needs.
  auto efficiency = [&](int64_t n) {
    const double waves = double(s.tiles * n) / s.sms;
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int64_t n = 1; n <= most; ++n) {
    if (useful(n)) best = std::max(best, efficiency(n));
  }
  for (int64_t n = 1; n <= most; ++n) {
    if (useful(n) && efficiency(n) >= kNearBest * best) return int32_t(n);
  }
  return 1;
}

}  // namespace fastattn::detail
