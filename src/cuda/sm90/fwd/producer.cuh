// The producer warp of the Hopper forward: Q of each tile, then its K and V blocks through the
// smem ring by TMA, in the tile's block-source order. K/V rows come from the sequence's batch
// entry, or from a KV cache's row and left-padding offset, or page by page (KvCacheParams).
#pragma once

#include <cuda.h>

#include <type_traits>

#include "cuda/sm90/fwd/split_stamps.cuh"
#include "cuda/sm90/prim/bulk_copy.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/mbarrier.cuh"
#include "cuda/sm90/prim/tma.cuh"

namespace fastattn::sm90 {

// Element-bitmask tiles (Cfg::kBitmask): the block-list walk below, where each K tile of a block whose
// entry asks for bits also brings that block's packed slot (2 KB, fwd/params.h bit_slot) into the ring
// slot's bits (tile.cuh BitStageSmem) on the same k_full barrier, its bytes in the same expect_tx. Each
// entry is read once, a block ahead of its K load. Bitmask calls have no KV cache (contiguous K / V).
template <class Cfg, class List, class LoadTile>
__device__ __forceinline__ void produce_bit_list(FwdSmem<Cfg>& sm, const List& b, LoadTile& load_tile,
                                                 PipeState<Cfg::kStages>& ps, PipeState<Cfg::kStages>& pk,
                                                 const CUtensorMap* tk, const CUtensorMap* tv, int k_row0,
                                                 int k_batch, int kv_head, const FwdBlockLists& lists) {
  constexpr int kKBytes = Cfg::kAtoms * Cfg::kKVAtomBytes, kSlotBytes = BitStageSmem<Cfg>::kSlotWords * 4;
  auto load_k_bits = [&](int entry) {
    const int s = pk.stage();
    const bool bits = entry & 1;
    mbar_wait(&sm.k_empty[s], pk.phase() ^ 1);
    sts_u32(smem_addr(&sm.bits.entry[s]), uint32_t(entry));  // released by the arrival below
    mbar_expect_tx(&sm.k_full[s], kKBytes + (bits ? kSlotBytes : 0));
#pragma unroll
    for (int a = 0; a < Cfg::kAtoms; ++a)
      tma_load_4d(sm.k[s] + a * Cfg::kKVAtomBytes, tk, a * kAtomCols, k_row0 + (entry >> 1) * Cfg::kBlockN, kv_head,
                  k_batch, &sm.k_full[s]);
    if (bits) bulk_load(sm.bits.words[s], bit_slot(lists, b.line + (entry >> 1)), kSlotBytes, &sm.k_full[s]);
    pk.advance();
  };
  constexpr std::integral_constant<int, Cfg::kVAtoms> kVAtoms{};
  int it = b.first();
  int entry = b.entry(it);
  int ahead = b.has_next(it) ? b.entry(b.next(it)) : 0;
  load_k_bits(entry);
  for (; !b.done(it); it = b.next(it), ps.advance()) {
    const int v_row = (entry >> 1) * Cfg::kBlockN;
    if (b.has_next(it)) {
      entry = ahead;
      const int after = b.next(b.next(it));
      if (!b.done(after)) ahead = b.entry(after);
      load_k_bits(entry);
    }
    load_tile(kVAtoms, tv, sm.v[ps.stage()], &sm.v_empty[ps.stage()], &sm.v_full[ps.stage()], ps.phase(), v_row,
              ps.stage());
  }
}

// Producer, one tile: Q into its buffer (once the consumers are done with the tile that used it
// before), then K and V of each visible KV tile, last first (the partial ones come first, so
// masking work overlaps with the later full tiles). `ps` and `qs` carry the ring and Q-buffer
// state from tile to tile.
template <class Cfg>
__device__ __forceinline__ void produce(FwdSmem<Cfg>& sm, const FwdTileFor<Cfg>& t, const CUtensorMap* tq,
                                        const CUtensorMap* tk, const CUtensorMap* tv,
                                        PipeState<Cfg::kStages>& ps, const PipeState<Cfg::kQBuffers>& qs,
                                        const cuda_backend::KvCacheParams& kv, const FwdBlockLists& lists) {
  split_stamp<Cfg>(kStampTile);  // first tile only: later tiles overwrite it (stamps builds only)
  constexpr std::integral_constant<int, Cfg::kAtoms> kKAtoms{};   // K tiles span d's atoms,
  constexpr std::integral_constant<int, Cfg::kVAtoms> kVAtoms{};  // V tiles d_v's
  mbar_wait(&sm.q_empty[qs.stage()], qs.phase() ^ 1);
  mbar_expect_tx(&sm.q_full[qs.stage()], Cfg::kQBytes);
#pragma unroll
  for (int a = 0; a < Cfg::kAtoms; ++a)
    tma_load_4d(sm.q[qs.stage()] + a * Cfg::kQAtomBytes, tq, a * kAtomCols, t.seq.q_offset + t.m0, t.head,
                t.seq.batch_coord, &sm.q_full[qs.stage()]);
  // The sequence's K/V: batch entry (fixed-length: the sequence; a KV cache: its row) and the
  // position of key 0 (varlen: the packed offset; a KV cache: its left padding).
  const int seq = t.seq.batch_coord;  // the sequence itself: KV-cache calls are fixed-length
  const int k_batch = kv.batch_idx != nullptr ? kv.batch_idx[seq] : seq;
  const int k_row0 = t.seq.k_offset + (kv.leftpad != nullptr ? kv.leftpad[seq] : 0);
  // Paged: where each box of block `row` lies into the slot's kv_boxes, before its K tile waits
  // for the slot. The page-table loads go two at a time (read-only path; all eight of a block of
  // 16-key pages at once spilled the producer's 24 registers), both issued before either is used,
  // so a block of two boxes pays one load latency; the block's V tile reuses them. A box from the
  // sequence's last key on gets page -1, which TMA fills with zeros (counting its bytes): no
  // page-table entry past the used pages is read, no memory touched.
  auto page_entry = [&](int pos) {  // key `pos`'s page-table entry
    return kv.page_table + int64_t(seq) * kv.pages_per_seq + kv.page_size.div(uint32_t(pos));
  };
  auto look_up_boxes = [&](int stage, int row) {
    auto page_at = [&](int pos) { return pos < t.seq.len_k ? __ldg(page_entry(pos)) : -1; };
    auto at = [&](int page, int pos) { return make_int2(page, int(kv.page_size.mod(uint32_t(pos)))); };
    for (int r = 0, j = 0; r < Cfg::kBlockN; r += 2 * kv.box_rows, j += 2) {
      const bool pair = r + kv.box_rows < Cfg::kBlockN;
      const int page0 = page_at(row + r);
      const int page1 = pair ? page_at(row + r + kv.box_rows) : -1;
      sm.kv_boxes[stage][j] = at(page0, row + r);
      if (pair) sm.kv_boxes[stage][j + 1] = at(page1, row + r + kv.box_rows);
    }
  };
  // Keys [r, r + box_rows) of a paged tile, every atom (`atoms`: K's or V's count), from `at` =
  // (page, position in the page). A key-half layout (Cfg::kPageHalves, box_rows = kBlockN / 2)
  // takes them in one copy: the map's box spans every atom, landing as [atom][box_rows] at the
  // half's place.
  auto load_box = [&](auto atoms, const CUtensorMap* map, uint8_t* dst, int r, int2 at, uint64_t* full) {
    if constexpr (Cfg::kPageHalves) {
      tma_load_5d(dst + (r / (Cfg::kBlockN / 2)) * Cfg::kAtoms * (Cfg::kKVAtomBytes / 2), map, 0, at.y, 0,
                  t.kv_head, at.x, full);
    } else {
#pragma unroll
      for (int a = 0; a < decltype(atoms)::value; ++a)
        tma_load_4d(dst + a * Cfg::kKVAtomBytes + r * (Cfg::kKVAtomBytes / Cfg::kBlockN), map, a * kAtomCols,
                    at.y, t.kv_head, at.x, full);
    }
  };
  // One K or V tile (keys [row, row + kBlockN) of the sequence) into ring slot `stage`, once the
  // consumers have released that slot. Paged: box by box, each from its page; the first two boxes'
  // places (all of them from page size kBlockN / 2 on) are read before the wait, so that after it
  // the TMA issues follow one another as the contiguous tile's do, with no smem load between.
  auto load_tile = [&](auto atoms, const CUtensorMap* map, uint8_t* dst, uint64_t* empty, uint64_t* full,
                       uint32_t phase, int row, int stage) {
    constexpr int kTileAtoms = decltype(atoms)::value;
    const bool paged = Cfg::kPageHalves || kv.page_table != nullptr;
    const bool two_boxes = Cfg::kPageHalves || kv.box_rows < Cfg::kBlockN;
    int2 box0 = make_int2(0, 0), box1 = make_int2(0, 0);
    if (paged) box0 = sm.kv_boxes[stage][0];
    if (paged && two_boxes) box1 = sm.kv_boxes[stage][1];
    mbar_wait(empty, phase ^ 1);
    mbar_expect_tx(full, kTileAtoms * Cfg::kKVAtomBytes);
    if (!paged) {  // a key-half kernel runs paged calls only (launch.cuh)
#pragma unroll
      for (int a = 0; a < kTileAtoms; ++a)
        tma_load_4d(dst + a * Cfg::kKVAtomBytes, map, a * kAtomCols, k_row0 + row, t.kv_head, k_batch, full);
      return;
    }
    load_box(atoms, map, dst, 0, box0, full);
    if (!two_boxes) return;
    load_box(atoms, map, dst, Cfg::kPageHalves ? Cfg::kBlockN / 2 : kv.box_rows, box1, full);
    if constexpr (!Cfg::kPageHalves) {
      for (int r = 2 * kv.box_rows, j = 2; r < Cfg::kBlockN; r += kv.box_rows, ++j)
        load_box(atoms, map, dst, r, sm.kv_boxes[stage][j], full);
    }
  };
  // K's tile of block `row`; its boxes looked up first when paged (unless `looked_up`).
  auto load_k = [&](const PipeState<Cfg::kStages>& s, int row, bool looked_up = false) {
    if (kv.page_table != nullptr && !looked_up) look_up_boxes(s.stage(), row);
    load_tile(kKAtoms, tk, sm.k[s.stage()], &sm.k_empty[s.stage()], &sm.k_full[s.stage()], s.phase(), row,
              s.stage());
  };
  // K runs one block ahead of V (FA3's order): K(n - 1) waits only for QK(n + 1) to free its slot,
  // not behind V(n), whose slot frees later (after PV(n + 2)). Both rings advance once per block,
  // so K(n) and V(n) share a stage index, as the consumers expect (and V(n) finds K(n)'s boxes).
  const auto b = t.blocks;  // a copy: through a reference ptxas ordered the coordinates' moves apart
  auto row_of = [&](int it) { return b.block(it) * Cfg::kBlockN; };
  PipeState<Cfg::kStages> pk = ps;
  if constexpr (Cfg::kBitmask) {
    produce_bit_list<Cfg>(sm, b, load_tile, ps, pk, tk, tv, k_row0, k_batch, t.kv_head, lists);
    return;
  } else if constexpr (Cfg::kBlockList) {
    // The same order, the blocks from the tile's list: each entry is read once, a block ahead of its
    // K load, so that the load's latency passes under the previous block's waits and copies.
    int it = b.first();
    int row = row_of(it);
    int ahead = b.has_next(it) ? row_of(b.next(it)) : 0;
    load_k(pk, row);
    pk.advance();
    for (; !b.done(it); it = b.next(it), ps.advance()) {
      const int v_row = row;
      if (b.has_next(it)) {
        row = ahead;
        const int after = b.next(b.next(it));
        if (!b.done(after)) ahead = row_of(after);
        load_k(pk, row);
        pk.advance();
      }
      load_tile(kVAtoms, tv, sm.v[ps.stage()], &sm.v_empty[ps.stage()], &sm.v_full[ps.stage()], ps.phase(), v_row,
                ps.stage());
    }
    return;
  }
  // Paged, one box a block (pages a multiple of kBlockN), 3 or more ring slots: block n + 2's
  // page-table entry is copied into its slot's box (cp.async) after K(n + 1)'s issue and waited
  // for before K(n + 2)'s, so its latency passes under V(n)'s wait. Looked up in line, the load
  // stood between V(n)'s issue and K(n + 2)'s: the narrow decode tile's paged calls ran 1-2.5 % slower
  // at 16-32 blocks a split (docs/notes/inference.md, session 55). The slot is free: its last reader,
  // V(n + 2 - kStages), has issued (only this thread reads kv_boxes, in program order before each
  // issue). A copy, not a register: the page carried across the wait spilled the producer's 24 registers.
  const bool pages_ahead = Cfg::kStages >= 3 && kv.page_table != nullptr && kv.box_rows == Cfg::kBlockN;
  // row < len_k always holds here (a tile's blocks end by len_k); the guard only keeps the page table
  // unread past the used pages should that change.
  auto fetch_box = [&](int stage, int row) {
    sm.kv_boxes[stage][0].y = int(kv.page_size.mod(uint32_t(row)));
    if (row < t.seq.len_k)
      cp_async_u32(smem_addr(&sm.kv_boxes[stage][0].x), page_entry(row));
    else
      sm.kv_boxes[stage][0].x = -1;
  };
  load_k(pk, row_of(b.first()));
  split_stamp<Cfg>(kStampIssued);
  pk.advance();
  if (pages_ahead && b.has_next(b.first())) fetch_box(pk.stage(), row_of(b.next(b.first())));
  for (int it = b.first(); !b.done(it); it = b.next(it), ps.advance()) {
    if (b.has_next(it)) {
      const int next = b.next(it);
      if (pages_ahead) cp_async_wait_all();  // block `next`'s page, fetched an iteration ago
      load_k(pk, row_of(next), pages_ahead);
      pk.advance();
      if (pages_ahead && b.has_next(next)) fetch_box(pk.stage(), row_of(b.next(next)));
    }
    load_tile(kVAtoms, tv, sm.v[ps.stage()], &sm.v_empty[ps.stage()], &sm.v_full[ps.stage()], ps.phase(),
              row_of(it), ps.stage());
  }
}

}  // namespace fastattn::sm90
