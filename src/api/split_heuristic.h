// How many parts to split each sequence's keys into (split-KV), when the caller leaves it to us
// (num_splits = 0). The CUDA dispatch asks it once the split kernel lands; docs/notes/inference.md
// gives the reasoning and the numbers it picks.
#pragma once

#include <cstdint>

namespace fastattn::detail {

struct SplitShape {
  int64_t tiles = 0;       // CTAs of the unsplit launch: batch x KV heads x q-blocks (GQA packed)
  int64_t key_blocks = 0;  // key blocks of the longest sequence
  int32_t sms = 0;         // streaming multiprocessors of the device
  int32_t max_splits = 128;
  // Peak HBM bandwidth of the device (bytes / s; cuda/device_info.h: hbm_bytes_per_s), 0 where
  // unknown: the streaming rule then aims at half the SMs.
  double hbm_bytes_per_s = 0;
  // Every tile reads K/V that no other tile reads (one tile per (batch, KV head): decode with GQA
  // packing, or one q-block per head): the launch streams K/V once and is bound by HBM, not by the
  // tensor cores, whatever its wave shape.
  bool streams_kv = false;
  // The tiles' rows fit the first consumer warpgroup's 64, so the second skips its GEMMs (a GQA-4
  // decode's 4 rows): a streaming CTA then moves ~72 GB/s, with both warpgroups working ~50.
  bool one_warpgroup = true;
};

// Streaming K/V (decode): enough CTAs to saturate HBM (the device's bandwidth over what one CTA
// streams; half the SMs where the bandwidth is unknown), with at least 4 key blocks per split; where
// the bandwidth is known, a count of at most 2 that fills half the SMs or fewer becomes one full
// wave (SMs / tiles) from 64 key blocks (split_heuristic.cpp: kLongStreamBlocks).
// Otherwise 1 when the unsplit launch already fills the machine; else the fewest splits whose last
// wave is nearly as full as the best choice's (within 85 %), among counts that change the blocks
// per split.
int32_t choose_num_splits(const SplitShape& s);

}  // namespace fastattn::detail
