// The recompute band's plan (docs/notes/bwd-sm90.md, sessions 32 and 34; band_kernel.cuh): a CTA
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


// What the band kernel (band_kernel.cuh, session 34) serves: the d 128 64-row tile, no softcap,
// windows with right = 0 and 0 < left <= 64, in either mode: it sums each q-block's dQ in one CTA in
// one order, so it is deterministic as it stands. Then a q-block's kept keys span at most
// 64 + left <= 128 keys, so at most two key blocks visit it, and they are consecutive: its dQ is the
// sum of one or two steps, and the lower one's is held on chip until the upper one's step (both in
// the owning band, the lower one possibly its halo block). The band's width: bwd_band_width. dq is
// stored as element pairs from the consumers' registers, so dq's pairs must be 4-byte aligned (the
// ring's rule too).
inline constexpr int kBwdBandMaxLeft = 64;
FASTATTN_HD bool bwd_band_serves(int d, int left, int right, float softcap, bool dq_pairs) {
  return d == 128 && softcap == 0.f && right == 0 && left > 0 && left <= kBwdBandMaxLeft && dq_pairs;
}

// The band width when the caller asks for none: the B of 1..64 with the fewest waves of bands times a
// band's length, B key blocks plus about one for its fixed work (set-up, the halo pass). Bands do not
// cross sequences: each of `units` (sequence, KV head) pairs of n_blocks key blocks makes
// ceil(n_blocks / B) bands. Ties go to the narrower band. Measured (H100, (64, 0) d 128): b2 h16 s8k
// 16 (4: 6 % slower), b2 h16 s4k 8, b1 h16 s8k 8 (docs/notes/bwd-sm90.md, session 34).
inline int bwd_band_width(int n_blocks, int64_t units, int sms) {
  int best = 1;
  int64_t best_cost = -1;
  for (int b = 1; b <= 64 && b <= n_blocks; ++b) {
    const int64_t ctas = units * ((n_blocks + b - 1) / b);
    const int64_t cost = (ctas + sms - 1) / sms * (b + 1);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = b;
    }
  }
  return best;
}

// Key block k's q-blocks, empty where the block holds no present key (k past the keys).
FASTATTN_HD cuda_backend::BlockRange bwd_band_block_q_blocks(const cuda_backend::WindowMask& mask, int k, int block_n,
                                                             int block_m) {
  cuda_backend::BlockRange r{};
  if (k >= 0 && int64_t(k) * block_n < mask.len_k) r = bwd_key_block_q_blocks(mask, k, block_n, block_m);
  return r;
}

// The halo's steps of band [first, end): key block first - 1's q-blocks that block first visits too
// (their highest visitor is first, so the band owns their dQ); empty for first = 0. The halo block
// runs these steps for dQ only (its dK / dV are the band below's).
FASTATTN_HD cuda_backend::BlockRange bwd_band_halo_q_blocks(const cuda_backend::WindowMask& mask, int first,
                                                            int block_n, int block_m) {
  cuda_backend::BlockRange below = bwd_band_block_q_blocks(mask, first - 1, block_n, block_m);
  const cuda_backend::BlockRange own = bwd_band_block_q_blocks(mask, first, block_n, block_m);
  if (own.empty()) below.end = below.begin;
  else if (below.begin < own.begin) below.begin = own.begin;
  return below;
}

// The dQ job of a step (key block k, q-block m) of a band: kBandDqNone where the q-block's upper
// visitor is past the band (the band above owns it: the step is for dK / dV only), kBandDqHold where
// the upper visitor is block k + 1 of this band (the partial waits in a slot), else the step is the
// q-block's last: kBandDqResume where block k - 1 visited it too (the held partial is added first),
// kBandDqStore where k is its only visitor. A tile's three facts: later_begin, the first q-block of
// block k + 1 (no later visitor below it; INT_MAX where k + 1 holds no key), later_job (kBandDqHold
// if k + 1 is in the band, else kBandDqNone), earlier_end, the end of block k - 1's q-blocks (0 for
// the band's halo block and block 0). Both run ends rise with the key block, so for m in block k's
// run "m >= later_begin" means "k + 1 visits m", and "m < earlier_end" means "k - 1 visits m".
enum BwdBandDq : int { kBandDqNone = 0, kBandDqHold = 1, kBandDqStore = 2, kBandDqResume = 3 };
struct BwdBandJobs {
  int later_begin, later_job, earlier_end;
  FASTATTN_HD int job(int m) const {
    return m >= later_begin ? later_job : m < earlier_end ? kBandDqResume : kBandDqStore;
  }
};
// Block k of band [first, end) (k = first - 1: the halo block).
FASTATTN_HD BwdBandJobs bwd_band_jobs(const cuda_backend::WindowMask& mask, int k, int first, int end, int block_n,
                                      int block_m) {
  const cuda_backend::BlockRange later = bwd_band_block_q_blocks(mask, k + 1, block_n, block_m);
  BwdBandJobs j;
  j.later_begin = later.empty() ? 0x7fffffff : later.begin;
  j.later_job = k + 1 < end ? kBandDqHold : kBandDqNone;
  const cuda_backend::BlockRange earlier =
      k >= first ? bwd_band_block_q_blocks(mask, k - 1, block_n, block_m) : cuda_backend::BlockRange{};
  j.earlier_end = earlier.empty() ? 0 : earlier.end;  // an empty run's ends say nothing
  return j;
}

// The slot that holds q-block m's partial for q head hh of the group (0 <= hh < q_per_kv) between
// its two visitors: the q-blocks held across one switch of key blocks are at most two consecutive
// ones (their rows kept by both blocks: left <= 64 rows), and block k + 1 walks its q-blocks rising,
// so it takes back m's partial (slot by m's parity) before it holds m + 2's. Slots 0 and 1 are the
// two dQ staging buffers in smem; the rest (GQA) a per-CTA run of bwd_band_spill_slots in global
// memory (BwdParams::band_spill), read back by the thread that wrote it.
FASTATTN_HD int bwd_band_slot(int m, int hh, int q_per_kv) { return (m & 1) * q_per_kv + hh; }
FASTATTN_HD int bwd_band_spill_slots(int q_per_kv) { return 2 * q_per_kv > 2 ? 2 * q_per_kv - 2 : 0; }

}  // namespace fastattn::sm90
