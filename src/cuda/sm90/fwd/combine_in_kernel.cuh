// Split-KV: the combine done by the split kernel itself (FwdSplit::arrivals set), in place of the
// combine kernel and its wait at small batch. Each consumer warp owns 16 rows of every tile it
// stores (rows wg * 64 + 16 * warp_in_wg + [0, 16)); once the warp's partials of a tile are
// stored, it raises its split's arrival flag for that row group, and a warp that finds every
// split's flag raised merges the group's rows with combine_row (split_combine_row.cuh: the
// combine kernel's code, so out and lse are bitwise those of the separate combine).
//
// Flags, not a counter: the flag words live in the call's own workspace (no other call can touch
// them, on any stream, captured or not) and are never zeroed before the launch; a raised flag holds
// the call's token (FwdSplit::token, a signalling-NaN pattern that no partial, LSE or key count
// holds), so whatever the workspace held before cannot pass for an arrival. The ordering: partial
// stores -> __syncwarp -> fence (release) -> flag store -> fence (sc) -> read every split's flag
// -> fence (acquire) -> read the partials. Of a group's warps (one per split), the one whose sc
// fence comes last in the sc order sees all flags, so at least one warp merges; two may (each saw
// all flags): they write the same bytes. No warp waits for another. The merging warp(s) lower the
// flags to 0 once done (a CUDA graph replays the same token into the same memory).
#pragma once

#include <cstdint>

#include "cuda/split_combine_row.cuh"
#include "cuda/sm90/fwd/epilogue.cuh"
#include "cuda/sm90/fwd/tile.cuh"

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
// order that lets no two warps miss each other's flag needs the sc fence (__threadfence).
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// Tile e (split tile id `id`): this warp's arrival for its 16 rows, and their merge if it is the
// last. Called by every lane of a consumer warp after consume() has stored all its tiles.
template <class T, class Cfg>
__device__ __forceinline__ void arrive_and_combine(const FwdParams& p, const FwdTile& e, int id, int row0) {
  const FwdSplit& sp = p.split;
  const int lane = threadIdx.x % 32;
  const int splits = int(sp.splits.d);
  const int heads = min(p.sched.pack_heads, (e.kv_head + 1) * p.attn.q_per_kv - e.head);
  // Rows the split kernel stores (stored_row: the same for every split of the tile); a group with
  // none has nothing to merge and raises no flag.
  float inv = 1.f, lse = 0.f;
  const bool mine = lane < 16 && stored_row(p, e, row0 + lane, heads, inv, lse).keep;
  const unsigned kept = __ballot_sync(0xffffffffu, mine);
  if (kept == 0) return;
  const int base = int(sp.splits.div(unsigned(id)));
  uint32_t* flags = sp.arrivals + (int64_t(base) * (Cfg::kBlockM / 16) + row0 / 16) * splits;
  __syncwarp();  // every lane's partial stores happen before lane 0's fence
  if (lane == 0) {
    fence_acq_rel_gpu();
    store_flag(flags + e.split, sp.token);
    __threadfence();
  }
  __syncwarp();
  bool all = true;
  for (int s = lane; s < splits; s += 32) all &= load_flag(flags + s) == sp.token;
  fence_acq_rel_gpu();  // the flags seen happen before the partial loads below
  if (!__all_sync(0xffffffffu, all)) return;
  __syncwarp();
  const cuda_backend::AttnParams& a = p.attn;
  for (unsigned rest = kept; rest != 0; rest &= rest - 1) {
    const int t = __ffs(rest) - 1;
    const StoredRow w = stored_row(p, e, row0 + t, heads, inv, lse);
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
  __syncwarp();
  for (int s = lane; s < splits; s += 32) store_flag(flags + s, 0);
}

// A consumer warp's arrivals for every tile of its CTA's walk (one tile when the launch picked
// this mode: tiles x splits <= CTAs), after all its partials are stored.
template <class T, class Cfg>
__device__ __forceinline__ void merge_in_kernel(const FwdParams& p, int wg) {
  const int row0 = wg * 64 + (threadIdx.x / 32) % 4 * 16;
  TileWalk walk;
  while (walk.next<Cfg>(p)) arrive_and_combine<T, Cfg>(p, walk.t, walk.id, row0);
}

}  // namespace fastattn::sm90
