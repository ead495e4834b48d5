// What the split-KV kernel's timestamps hold (split_stamps.cuh), for the device side and the
// host that reads them (tests/gpu/kvcache_bench.cpp).
#pragma once

namespace fastattn::sm90 {

enum SplitStamp : int {
  kStampStart,    // kernel entry (thread 0)
  kStampBarrier,  // after the barrier set-up's __syncthreads (thread 0)
  kStampRegs,     // producer: its registers given back (setmaxnreg), before the tile walk
  kStampTile,     // producer: its first tile known (sequence lengths read, key range split)
  kStampIssued,   // producer: Q and the first K tile's TMA issued
  kStampFirstK,   // consumer warpgroup 0: Q and the first K tile have landed
  kStampLastPv,   // consumer warpgroup 0: the tile's last PV has retired
  kStampStored,   // consumer warpgroup 0: the partial O and LSE stores issued
  kStamps
};
// Per CTA: kStamps SM clocks (clock64), then the global timer (ns) at kStampStart.
constexpr int kStampCtas = 1024, kStampWords = kStamps + 1;

}  // namespace fastattn::sm90
