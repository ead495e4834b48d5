// Cached choice of the longest-first section width per launch shape (sched/causal_sections.h): the
// simulation costs up to 32 passes over the tiles, the cache makes repeated shapes free.
#include "cuda/causal_sections.h"

#include <map>
#include <mutex>
#include <tuple>

#include "cuda/device_info.h"
#include "cuda/sched/causal_sections.h"

namespace fastattn::cuda_backend {

// w from choose_section_slots; 0 (unmasked only): the default order, with the padding rows last.
static void apply_section_slots(FwdParams& p, int w) {
  if (w > 0) {
    p.section_slots = w;
    return;
  }
  p.heavy_first = 0;
  p.first_block_pad = 0;
  p.section_slots = p.batch_heads;
}

Status set_section_slots(FwdParams& p, int ctas, int block_rows, int64_t kv_bytes_per_slot) {
  p.section_slots = p.batch_heads;
  if (!p.heavy_first) return Status::Ok();
  int l2 = 0;
  Status st = l2_bytes(&l2);
  if (!st.ok()) return st;
  using Key = std::tuple<int, int, int, int, int, int, int, int64_t, int, bool, int>;
  const Key key{p.tiles,    p.m_blocks,        p.batch_heads, p.heads_q,          p.seqlen_k - p.seqlen_q, ctas,
                block_rows, kv_bytes_per_slot, l2,            p.window_right < 0, p.first_block_pad};
  static std::mutex mu;
  static std::map<Key, int> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      apply_section_slots(p, it->second);
      return Status::Ok();
    }
  }
  const int w = choose_section_slots(p, ctas, block_rows, kv_bytes_per_slot, l2);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();  // bounded: shapes seen by one process
  cache.emplace(key, w);
  apply_section_slots(p, w);
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
