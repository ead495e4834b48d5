// The default mode's L2-resident dQ ring (d 128, windows with both edges): instead of an fp32
// accumulator over every q row (cleared by the preprocess, added into by the main kernel, written
// back to HBM and read again by the postprocess), q-block P accumulates in slot P mod R of a ring
// small enough to stay in L2, and the dQ writer that brings its last contribution writes dq itself
// (dq.cuh, bwd_ring_lead; docs/notes/bwd-sm90.md, session 27). Host and device: the CPU tests
// check the rule, the visit counts and the order argument below.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/mask/block_source.cuh"
#include "cuda/mask/window_mask.cuh"
#include "cuda/sm90/bwd/lpt_order.h"

namespace fastattn::sm90 {

// The q-blocks (of block_m rows) that key block n_block (of block_n keys) works on: the main
// kernel's tile (tile.cuh) and the ring's visit counts both take them from here.
FASTATTN_HD cuda_backend::BlockRange bwd_key_block_q_blocks(const cuda_backend::WindowMask& mask, int n_block,
                                                            int block_n, int block_m) {
  return cuda_backend::query_blocks(mask, n_block * block_n, n_block * block_n + block_n, block_m);
}

// The key blocks that work on q-block m, [first, end) (empty: first >= end): both ends of
// bwd_key_block_q_blocks rise with the key block (row_lo, row_hi do), so the blocks with begin <= m
// are a prefix and those with end > m a suffix of the blocks that hold a present key; the visitors
// are their overlap, found by two bisections (the ring's visit counts; band.h's owners).
FASTATTN_HD void bwd_q_block_visitors(const cuda_backend::WindowMask& mask, int m, int block_n, int block_m, int& first,
                                      int& end) {
  const int blocks = mask.len_k > 0 ? (mask.len_k + block_n - 1) / block_n : 0;
  int lo = 0, hi = blocks;  // the first block whose q-blocks end past m
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (bwd_key_block_q_blocks(mask, mid, block_n, block_m).end > m) hi = mid;
    else lo = mid + 1;
  }
  first = lo;
  lo = 0;
  hi = blocks;  // the first block whose q-blocks begin past m
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (bwd_key_block_q_blocks(mask, mid, block_n, block_m).begin > m) hi = mid;
    else lo = mid + 1;
  }
  end = lo;
}

// How many key blocks work on q-block m.
FASTATTN_HD int bwd_q_block_visits(const cuda_backend::WindowMask& mask, int m, int block_n, int block_m) {
  int first, end;
  bwd_q_block_visitors(mask, m, block_n, block_m, first, end);
  return end > first ? end - first : 0;
}

// The order lag, in q-blocks: key block n works on q-block m' only if block_n n - diag - right <
// block_m (m' + 1), and on q-block m only if block_n n + block_n - diag + left > block_m m; so
// when m' <= m - lag with block_m (lag - 1) >= left + right + block_n, every key block of m' lies
// below every key block of m, whatever diag.
FASTATTN_HD int bwd_ring_lag(int left, int right, int block_n, int block_m) {
  return (left + right + block_n + block_m - 1) / block_m + 1;
}

// The ring position of (sequence b, q head h, q-block m): q-blocks in the order the longest-first
// CTA order (lpt_order.h: per section of units, key block n of every unit before key block n + 1)
// reaches them: by section, then q-block, then unit, then the group's q head, every section counted
// `section` units wide (a narrower last one leaves positions unused). One to one, below
// bwd_ring_positions. With R a multiple of section x q_per_kv and at least lag times it, position
// P - R is the same unit and q head at q-block m - R / (section x q_per_kv) <= m - lag (the lag's
// argument holds within one sequence), or in an earlier section: every key block that adds into it
// starts (takes its ticket) before any key block of P, which makes waiting for its slot
// deadlock-free (induction on the tickets: the earliest unfinished CTA waits on finished ones only).
FASTATTN_HD int64_t bwd_ring_position(int b, int h, int m, int heads_kv, int q_per_kv, int m_blocks, int section) {
  const int unit = b * heads_kv + h / q_per_kv;
  const int first = unit / section * section;
  return ((int64_t(first) * m_blocks + int64_t(m) * section + (unit - first)) * q_per_kv) + h % q_per_kv;
}
FASTATTN_HD int64_t bwd_ring_positions(int units, int q_per_kv, int m_blocks, int section) {
  return int64_t((units + section - 1) / section) * section * m_blocks * q_per_kv;
}

// A position's arrival count: the writers of a q-block with two or more visitors count their adds
// (0 .. need), the last one then frees the slot (need + 1). A q-block with one visitor or none never
// touches its slot (its count starts at the free value; nobody waits on it).
FASTATTN_HD int bwd_ring_free_count(int need) { return need + 1; }
FASTATTN_HD int bwd_ring_initial_count(int need) { return need <= 1 ? bwd_ring_free_count(need) : 0; }

// The position a writer of position `at` (need >= 2) waits for before its first add: the slot's
// last earlier user, at - k R for the smallest k whose q-block has two or more visitors (those
// between never touched the slot, so their "free" says nothing about it); -1 when there is none.
// Once that one is free, every earlier user is (it waited likewise before its adds). It lies k R
// positions back, so the order argument above holds for it as for at - R. `need(i)`: position i's
// visit count.
template <class Need>
FASTATTN_HD int bwd_ring_wait_target(int at, int slots, const Need& need) {
  int prev = at - slots;
  while (prev >= 0 && need(prev) <= 1) prev -= slots;
  return prev;
}

// The ring kernel's walk over a CTA's steps: q-blocks rising, the group's heads inner. A key block's
// lowest q-block is shared with the block below (an earlier ticket), so its writer is usually the
// last there and loads the slot back: walking up puts that first, behind the tile's other steps,
// and leaves the CTA's last step an add (walking down ended every CTA on a load-back and store).
// Session 32's reading (notes): neighbouring key blocks start ~4 tickets apart and run together, so
// the later step is the last visitor whichever way the walk goes (an edges-first walk measured level).
inline constexpr int kBwdRingWalk = kBwdWalkUpInner;

// 512 slots of 64 x 128 fp32: 16 MB of the 50 MB L2, more than the ~264 q-blocks that a wave of 132
// CTAs of the (64, 0) window spans at s 8k, so that a writer rarely waits for its slot.
inline constexpr int kBwdRingSlots = 512;
// Windows up to this width (left + right): a q-block then has at most 10 contributors.
inline constexpr int kBwdRingMaxWindow = 1024;

// The host's rule: the ring's slot count R, or 0 for the accumulator path. Default mode, d 128 (the
// 64-row tile, longest-first order: launch.cuh), both window edges set and narrow, dq's element
// pairs 4-byte aligned (dq is stored as pairs), a power-of-two group (q_per_kv; the section is one),
// and the lag's slots (lag x section x q_per_kv) within kBwdRingSlots. R is a power of two (slot =
// position & (R - 1)), so a multiple of section x q_per_kv; `wanted` (tests: fewer slots, so that the
// ring wraps and writers wait) is raised to the lag's minimum. The workspace holds
// bwd_ring_slots_held of them: no more than the positions.
// The host's default (session 35, H100, interleaved A/B against the accumulator path on the same
// library): the ring only for windows with left = 0 and right <= 64 at GQA groups of up to 4, where it
// measured 10-32 % faster ((0, 0) to (0, 64), MHA and GQA 4). At every other window it serves ((16, 16)
// to (1000, 24), b 1-16, s 1k-16k) it took 3-38 % longer than the accumulator path, which runs level
// with FA3's, and at GQA 8 33 % longer even at (0, 64); at GQA 4 (128, 0) and (64, 64) it was 3-4 %
// faster (left to the accumulator path, for one rule). Windows with right = 0 and 0 < left <= 64 take the
// recompute band (band.h) before either. The host's FASTATTN_BWD_RING_SLOTS=n > 0 takes the ring wherever
// bwd_dq_ring_slots serves (tests, A/Bs).
inline constexpr int kBwdRingDefaultRight = 64, kBwdRingDefaultGroup = 4;
FASTATTN_HD bool bwd_ring_by_default(int left, int right, int q_per_kv) {
  return left == 0 && right >= 0 && right <= kBwdRingDefaultRight && q_per_kv <= kBwdRingDefaultGroup;
}

inline int bwd_dq_ring_slots(int d, bool deterministic, int left, int right, bool dq_pairs, int units, int q_per_kv,
                             int m_blocks, int section, int wanted = kBwdRingSlots) {
  if (d != 128 || deterministic || left < 0 || right < 0 || left > kBwdRingMaxWindow || right > kBwdRingMaxWindow ||
      left + right > kBwdRingMaxWindow || !dq_pairs)  // each edge first: no int overflow in the sum
    return 0;
  if (units <= 0 || m_blocks <= 0 || q_per_kv <= 0 || (q_per_kv & (q_per_kv - 1)) != 0 || (section & (section - 1)) != 0)
    return 0;
  if (bwd_ring_positions(units, q_per_kv, m_blocks, section) >= (int64_t(1) << 31)) return 0;
  const int64_t lag_slots = int64_t(bwd_ring_lag(left, right, 128, 64)) * section * q_per_kv;
  if (lag_slots > kBwdRingSlots) return 0;
  int slots = 1;
  while (slots < lag_slots || (slots < wanted && slots < kBwdRingSlots)) slots *= 2;
  return slots;
}
FASTATTN_HD int64_t bwd_ring_slots_held(int slots, int64_t positions) { return slots < positions ? slots : positions; }

}  // namespace fastattn::sm90
