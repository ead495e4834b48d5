// The recompute band's plan (docs/notes/bwd-sm90.md, session 32; no kernel uses it yet): a CTA
// takes `band` consecutive key blocks of one unit (sequence, KV head) and owns the dQ of every
// q-block whose highest visiting key block lies in its band; the keys of an owned q-block below the
// band's first key (the halo) it recomputes S / dP over, for dQ only. Then each q-block's dQ is
// summed in one CTA: no ring, no fp32 accumulator, no wait on another CTA. Host and device; the CPU
// tests (bwd_band_test.cpp) check the partition and the halo against every kept (row, key) pair.
#pragma once

#include "cuda/common/host_device.h"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/dq_ring.h"  // bwd_q_block_visitors: the kernel's tile's visits

namespace fastattn::sm90 {

// Key blocks [first, end) of band j (of `band` blocks) among n_blocks; empty past them.
FASTATTN_HD void bwd_band_blocks(int j, int band, int n_blocks, int& first, int& end) {
  first = j * band < n_blocks ? j * band : n_blocks;
  end = first + band < n_blocks ? first + band : n_blocks;
}

// The q-blocks whose dQ band [first, end) owns: those whose highest visitor lies in it, a run
// [begin, stop) since the highest visitor rises with m (both run ends do); m_blocks: the sequence's
// q-blocks. Bisection on "highest visitor >= first" and ">= end".
FASTATTN_HD void bwd_band_owned_q_blocks(const cuda_backend::WindowMask& mask, int first, int end, int m_blocks,
                                         int block_n, int block_m, int& begin, int& stop) {
  auto owned_from = [&](int key_block) {  // the first q-block whose highest visitor is >= key_block
    int lo = 0, hi = m_blocks;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      int f, e;
      bwd_q_block_visitors(mask, mid, block_n, block_m, f, e);
      if (e > f && e - 1 >= key_block) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  begin = first < end ? owned_from(first) : 0;
  stop = first < end ? owned_from(end) : 0;
  // A q-block that no block visits (no kept key) sits inside the run only if its neighbours are
  // owned around it; it has no owner (its dq is 0, written elsewhere), which the kernel skips by
  // its empty visitor run.
}

// The first halo key of the band: the lowest key that a row of its first owned q-block keeps
// (rows rise -> lo rises), if below the band's first key; else first_key (no halo). Rows past the
// sequence's q rows keep nothing.
FASTATTN_HD int bwd_band_halo_begin(const cuda_backend::WindowMask& mask, int first_owned, int first_key, int block_m) {
  const int row = first_owned * block_m;
  if (row >= mask.len_q()) return first_key;
  const int lo = mask.lo(row);
  return lo < first_key ? lo : first_key;
}

}  // namespace fastattn::sm90
