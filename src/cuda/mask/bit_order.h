// Element bitmasks (MaskKind::DenseBitmask) in the order a thread of a 64xN warpgroup accumulator
// holds its scores (mask/keep_bits.cuh): thread t of a quad holds, of each of its rows, the columns
// 8j + 2t + e (j < N / 8, e = 0 / 1) as bit k = 2j + e of its keep word. The caller's mask holds
// column c of a row as bit c % 32 of word c / 32, so a thread's 32 columns of a 128-key block are
// spread over the row's four words, two bits of every byte. The forward's prep kernel
// (sm90/bit_lists.cu) gathers them once per partial block, so that in the mainloop a thread loads
// its row's keep word with one 32-bit load and ANDs it into the window's keep bits.
// Host and device (the CPU tests check the order against the definition).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"

namespace fastattn::cuda_backend {

// Thread t's (0..3) keep word of one row of a 128-key block from the row's four mask words w[0..3]
// (keys 0-31, 32-63, 64-95, 96-127 of the block): bit 2j + e = key 8j + 2t + e.
FASTATTN_HD uint32_t quad_keep_word(const uint32_t (&w)[4], int t) {
  uint32_t out = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int q = 0; q < 4; ++q) {
    // word q holds j = 4q + j' (j' < 4) at bits 8j' + 2t + e: shift to 8j' + e, then close the gaps
    uint32_t x = (w[q] >> (2 * t)) & 0x03030303u;  // bits 0-1, 8-9, 16-17, 24-25
    x = (x | (x >> 6)) & 0x000f000fu;              // bits 0-3, 16-19
    x = (x | (x >> 12)) & 0xffu;                   // bits 0-7: 2j' + e
    out |= x << (8 * q);
  }
  return out;
}

// The class of a block of the mask from its bits: no bit set (Empty: never loaded), every bit set
// (Full: no bits read), else Partial (its bits gathered and applied).
enum BitBlockClass : uint8_t { kBitsEmpty = 0, kBitsFull = 1, kBitsPartial = 2 };

// Which part of a tile's list key block n (inside the tile's window range) goes to, from its class and
// the window's full range [full_begin, full_end) clipped into the range: 0 the kept blocks below the
// full range, 1 those full in both (window and bits), 2 the rest above (bit-partial blocks inside the
// window's full range included), -1 none (empty). The list holds part 0, then 1, then 2, each
// ascending, so that the full blocks are one interval of positions (BlockList's full range) and an
// all-ones mask lists the window's own blocks in the unmasked kernel's order. Entries: block * 2 +
// (class partial: the bits are applied).
FASTATTN_HD int bit_list_part(int n, uint8_t cls, int full_begin, int full_end) {
  if (cls == kBitsEmpty) return -1;
  if (n < full_begin) return 0;
  if (n < full_end && cls == kBitsFull) return 1;
  return 2;
}

}  // namespace fastattn::cuda_backend
