// Host planning of a CUDA launch: the problem's kernel-side form, and the tile schedule.
#include "cuda/launch_plan.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cuda/device_info.h"
#include "cuda/sched/l2_sections.h"
#include "cuda/sched/tile_space.h"

namespace fastattn::cuda_backend {

namespace {

// A window edge that reaches past every row's keys on its side (left >= the longest key run, right
// >= the longest query run: row i + diag - left < 0, row i + diag + right >= len_k) bounds nothing:
// -1, the same mask. It also keeps the kernels' int arithmetic on rows and edges (window_mask.cuh,
// the backward's dQ ring rule) from overflowing for edges near INT32_MAX.
int32_t effective_edge(int32_t edge, int32_t longest) { return edge >= longest ? -1 : edge; }

}  // namespace

LaunchProblem make_launch_problem(const detail::Problem& p) {
  LaunchProblem lp;
  lp.problem = &p;
  AttnParams& a = lp.attn;
  a.out = p.out.data;
  a.out_stride_b = p.out.batch_stride;  // 0 for varlen
  a.out_stride_s = p.out.token_stride;
  a.out_stride_h = p.out.head_stride;
  if (p.lse.defined()) {  // (b, h, s_q), or (h, total_q) for varlen
    a.lse = static_cast<float*>(p.lse.data);
    a.lse_stride_b = p.lse.batch_stride;
    a.lse_stride_h = p.lse.head_stride;
    a.lse_stride_s = p.lse.token_stride;
  }
  a.batch = p.batch;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.q_per_kv = p.group;
  a.seqlen_q = p.max_rows_q;  // varlen: the caller's max_seqlen bounds
  a.seqlen_k = p.max_rows_k;
  a.cu_seqlens_q = p.seq_arrays.cu_q;
  a.cu_seqlens_k = p.seq_arrays.cu_k;
  a.seqused_q = p.seq_arrays.used_q;
  a.seqused_k = p.seq_arrays.used_k;
  constexpr float kLog2e = 1.4426950408889634f;
  if (p.softcap > 0.f) {
    a.softcap = p.softcap;
    a.softcap_in = p.scale / p.softcap;
    a.scale_log2 = kLog2e;
  } else {
    a.scale_log2 = p.scale * kLog2e;
  }
  a.window_left = effective_edge(p.window_left, p.max_rows_k);
  a.window_right = effective_edge(p.window_right, p.max_rows_q);
  lp.kv.batch_idx = p.cache.batch_idx;
  lp.kv.leftpad = p.cache.leftpad;
  lp.kv.page_table = p.cache.page_table;
  lp.kv.pages_per_seq = p.cache.pages_per_seq;
  lp.kv.page_size = FastDiv(uint32_t(p.cache.page_size));
  lp.mask = classify_mask(a.window_left, a.window_right);
  lp.pack = choose_gqa_pack(a.q_per_kv, a.seqlen_q, p.varlen);
  lp.num_splits = p.num_splits_arg;
  lp.kvcache_call = p.kvcache_call;
  return lp;
}

namespace {

// The L2 section width of a longest-first schedule (sched/l2_sections.h), cached per launch shape:
// the simulation costs up to 97 passes over the tiles (0.2-0.8 ms at s 16k), the cache makes
// repeated shapes free. 0 (unmasked only): drop the longest-first order.
Status section_slots(const LaunchProblem& lp, const TileSchedule& s, int ctas, int64_t kv_bytes_per_slot, int* w) {
  const AttnParams& a = lp.attn;
  int l2 = 0;
  Status st = l2_bytes(&l2);
  if (!st.ok()) return st;
  const bool causal = lp.mask == MaskClass::Causal;
  using Key = std::tuple<int, int, int, int, int, int, int, int64_t, int, bool, int>;
  const Key key{s.tiles,     s.m_blocks,        s.batch_heads, a.heads_q, a.seqlen_k - a.seqlen_q, ctas,
                s.tile_rows, kv_bytes_per_slot, l2,            !causal,   s.first_block_pad};
  static std::mutex mu;
  static std::map<Key, int> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      *w = it->second;
      return Status::Ok();
    }
  }
  *w = choose_section_slots(s, a, causal, ctas, kv_bytes_per_slot, l2);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();  // bounded: shapes seen by one process
  cache.emplace(key, *w);
  return Status::Ok();
}

}  // namespace

Status plan_schedule(const LaunchProblem& lp, const ScheduleShape& shape, TileSchedule* out, int* ctas) {
  const TileSpace space = shape.planned != nullptr
                              ? *shape.planned
                              : plan_tile_space(lp.attn, lp.mask, lp.pack, shape.tile_rows, shape.pad_first_ok);
  if (space.s.tile_rows != shape.tile_rows || space.pad_first_ok != shape.pad_first_ok)
    return Status::Unsupported("internal: the planned tile space is not the launch config's");
  TileSchedule s = space.s;
  if (space.tiles > INT32_MAX)
    return Status::Unsupported("q: more than 2^31 tiles of " + std::to_string(shape.tile_rows) +
                               " rows x heads x batch");
  *ctas = 0;
  if (s.tiles > 0) {
    Status st = persistent_grid(s.tiles, ctas);
    if (!st.ok()) return st;
  }
  // The longest-first order's L2 sections; where none beats the default order (unmasked only),
  // the default order, padding rows last.
  int w = s.batch_heads;
  if (s.heavy_first && s.tiles > 0) {
    Status st = section_slots(lp, s, *ctas, shape.kv_bytes_per_slot, &w);
    if (!st.ok()) return st;
  }
  s.heavy_first = w > 0 ? s.heavy_first : 0;
  s.first_block_pad = w > 0 ? s.first_block_pad : 0;
  s.section_slots = w > 0 ? w : s.batch_heads;
  s.div = tile_divisors(s, lp.attn.heads_kv);
  *out = s;
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
