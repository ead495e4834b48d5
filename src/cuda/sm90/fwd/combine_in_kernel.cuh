// Split-KV: the combine done by the split kernel itself (FwdSplit::arrivals set), in place of the
// combine kernel and its wait at small batch. Once all of a CTA's consumer warps have stored their
// partials of a tile, the CTA raises its split's arrival flag for the tile, and a CTA that then
// finds every split's flag raised merges the tile's stored rows with combine_row
// (split_combine_row.cuh: the combine kernel's code, so out and lse are bitwise those of the
// separate combine). The rows go to the CTA's consumer warps in turn (row k of the tile's stored
// rows to warp k % warps), so a decode tile's rows (s_q 1 with GQA: one per q head) merge side by
// side, each in one round trip of loads (combine_row loads the LSEs and partials together), not
// one after another.
//
// Flags, not a counter: the flag words live in the call's own workspace (no other call can touch
// them, on any stream, captured or not) and are never zeroed before the launch; a raised flag holds
// the call's token (FwdSplit::token, a signalling-NaN pattern that no partial, LSE or key count
// holds), so whatever the workspace held before cannot pass for an arrival. The ordering: every
// consumer's partial stores -> named barrier -> one thread: fence (release) -> flag store -> fence
// (sc) -> its warp reads every split's flag -> fence (acquire) -> named barrier -> every warp reads
// the partials. Of a tile's CTAs (one per split), the one whose sc fence comes last in the sc order
// sees all flags, so at least one CTA merges; two may (each saw all flags): they write the same
// bytes. No CTA waits for another. A merging CTA lowers the flags to 0 as soon as it has seen them
// all (every split has arrived by then; a CTA that reads a lowered flag has a merger beside it), so
// a CUDA graph replaying the same token into the same memory starts from lowered flags.
#pragma once

#include <cstdint>

#include "cuda/split_combine_row.cuh"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/tile.cuh"
#include "cuda/sm90/prim/barriers.h"
#include "cuda/sm90/prim/regs.cuh"

namespace fastattn::sm90 {

__device__ __forceinline__ void store_flag(uint32_t* flag, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_flag(const uint32_t* flag) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}
// Release before the flag store, acquire after the flag loads; between the two, the store-load
// order that lets no two CTAs miss each other's flag needs the sc fence (__threadfence).
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// Tile e (split tile id `id`) of this CTA: its arrival, and the merge of its stored rows if the CTA
// is the last to arrive. Called by every consumer thread after consume() has stored all its tiles;
// `merge` is the CTA's shared word for warp 0's verdict.
template <class T, class Cfg>
__device__ __forceinline__ void arrive_and_combine(const FwdParams& p, const FwdTile& e, int id, int& merge) {
  constexpr int kWarps = 4 * Cfg::kConsumerWarpgroups;
  constexpr int kChunks = Cfg::kBlockM / 32;
  const FwdSplit& sp = p.split;
  const int lane = threadIdx.x % 32, warp = int(threadIdx.x / 32) - 4;
  const int splits = int(sp.splits.d);
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
  // The rows the split kernel stored (stored_row: the same for every split of the tile), 32 a
  // ballot; a tile with none raises no flag (the same answer in every warp of every split's CTA).
  unsigned kept[kChunks];
  bool any = false;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    float inv = 1.f, lse = 0.f;
    kept[c] = __ballot_sync(0xffffffffu, stored_row(p, e, 32 * c + lane, heads, inv, lse).keep);
    any |= kept[c] != 0;
  }
  if (!any) return;
  uint32_t* flags = sp.arrivals + int64_t(sp.splits.div(unsigned(id))) * splits;
  // Every consumer warp's partial stores (and the previous tile's read of `merge`) happen before
  // the release below.
  named_bar_sync(kMergeBar, 128 * Cfg::kConsumerWarpgroups);
  if (warp == 0) {
    if (lane == 0) {
      fence_acq_rel_gpu();
      store_flag(flags + e.split, sp.token);
      __threadfence();
    }
    __syncwarp();
    bool all = true;
    for (int s = lane; s < splits; s += 32) all &= load_flag(flags + s) == sp.token;
    fence_acq_rel_gpu();  // the flags seen happen before every warp's partial loads (barrier below)
    const bool last = __all_sync(0xffffffffu, all);
    if (last)
      for (int s = lane; s < splits; s += 32) store_flag(flags + s, 0);
    if (lane == 0) merge = last ? 1 : 0;
  }
  named_bar_sync(kMergeBar, 128 * Cfg::kConsumerWarpgroups);
  if (merge == 0) return;
  const cuda_backend::AttnParams& a = p.attn;
  int stored = 0;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) stored += __popc(kept[c]);
  for (int k = warp; k < stored; k += kWarps) {  // one combine_row in the code, not one per chunk
    int t = 0, n = k;                            // the tile row of the k-th stored row
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int here = __popc(kept[c]);
      if (n >= 0 && n < here) t = 32 * c + __fns(kept[c], 0, n + 1);
      n -= here;
    }
    float inv = 1.f, lse = 0.f;
    const StoredRow w = stored_row(p, e, t, heads, inv, lse);
    const int64_t head = e.head + w.g, token = e.seq.q_offset + w.r;
    const int64_t row = (int64_t(e.seq.batch_coord) * a.heads_q + head) * sp.rows_per_head + token;
    T* out = static_cast<T*>(a.out) + e.seq.batch_coord * a.out_stride_b + token * a.out_stride_s +
             head * a.out_stride_h;
    float* lse_out = a.lse != nullptr
                         ? a.lse + e.seq.batch_coord * a.lse_stride_b + head * a.lse_stride_h + token * a.lse_stride_s
                         : nullptr;
    cuda_backend::combine_row<T>(sp.o_part + row * Cfg::kHeadDim, sp.lse_part + row, sp.rows, splits,
                                 Cfg::kHeadDim, out, lse_out);
  }
}

// The CTA's arrivals for every tile of its walk (one tile when the launch picked this mode:
// tiles x splits <= CTAs), after all its partials are stored. Every consumer thread calls it.
template <class T, class Cfg>
__device__ __forceinline__ void merge_in_kernel(const FwdParams& p) {
  __shared__ int merge;
  TileWalk walk;
  while (walk.next<Cfg>(p)) arrive_and_combine<T, Cfg>(p, walk.t, walk.id, merge);
}

}  // namespace fastattn::sm90
