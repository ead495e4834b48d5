// forward_kvcache's rules, in the order a user most likely needs to hear about them. Every failure
// returns before the cache or an output is written; the message names the argument and the rule.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "api/index_arrays.h"
#include "api/kvcache_plan.h"
#include "api/message.h"
#include "api/tensor_checks.h"
#include "api/validate.h"

namespace fastattn::detail {
namespace {

constexpr int kPageMultiple = 16;
constexpr int kRotaryMultiple = 16;
constexpr const char* kQDims = "(batch, seqlen_q, heads, head_dim)";

// q, caches, out, lse: forms, dtypes and the sizes they share.
Status check_main_tensors(const KvCacheArgs& a, bool paged) {
  const char* cache_dims = paged ? "(num_pages, page_size, heads_kv, head_dim)"
                                 : "(batch_cache, seqlen_cache, heads_kv, head_dim)";
  Status st = check_form("q", a.q, 4, kQDims);
  if (st.ok()) st = check_form("k_cache", a.k_cache, 4, cache_dims);
  if (st.ok()) st = check_form("v_cache", a.v_cache, 4, cache_dims);
  if (st.ok()) st = check_form("out", a.out, 4, "(batch, seqlen_q, heads, head_dim_v)");
  if (st.ok()) st = check_dtype("k_cache", a.k_cache, a.q.dtype, "q and the cache share a dtype");
  if (st.ok()) st = check_dtype("v_cache", a.v_cache, a.q.dtype, "q and the cache share a dtype");
  if (st.ok()) st = check_dtype("out", a.out, a.q.dtype, "out has q's dtype");
  if (!st.ok()) return st;
  const int64_t b = a.q.shape[0], sq = a.q.shape[1], hq = a.q.shape[2], d = a.q.shape[3];
  const int64_t hkv = a.k_cache.shape[2], dv = a.v_cache.shape[3];
  st = check_shape("k_cache", a.k_cache, {a.k_cache.shape[0], a.k_cache.shape[1], hkv, d},
                   paged ? "(num_pages, page_size, heads_kv, head_dim of q)"
                         : "(batch_cache, seqlen_cache, heads_kv, head_dim of q)");
  if (st.ok()) {
    st = check_shape("v_cache", a.v_cache, {a.k_cache.shape[0], a.k_cache.shape[1], hkv, dv},
                     "(dims 0 and 1 of k_cache, heads_kv of k_cache, head_dim_v)");
  }
  if (st.ok()) st = check_shape("out", a.out, {b, sq, hq, dv}, "(batch, seqlen_q, heads_q, head_dim_v)");
  if (!st.ok()) return st;
  if (hkv < 1 || hq % hkv != 0) {
    return Status::Invalid(msg("q: heads ", hq, " is not a multiple of k_cache's heads ", hkv,
                               " (GQA needs heads_q % heads_kv == 0 and heads_kv >= 1)"));
  }
  if (a.lse.defined()) {
    st = check_form("lse", a.lse, 3, "(batch, heads, seqlen_q)");
    if (st.ok()) st = check_dtype("lse", a.lse, DType::F32, "lse is always fp32");
    if (st.ok()) st = check_shape("lse", a.lse, {b, hq, sq}, "(batch, heads_q, seqlen_q)");
  }
  return st;
}

// The paged form, or the contiguous cache's batch rows.
Status check_cache_layout(const KvCacheArgs& a, bool paged) {
  const int64_t b = a.q.shape[0];
  if (!paged) {
    if (!a.cache_batch_idx.defined() && a.k_cache.shape[0] < b) {
      return Status::Invalid(msg("k_cache: has ", a.k_cache.shape[0], " batch rows but q has batch ", b,
                                 " (without cache_batch_idx sequence b reads cache row b)"));
    }
    return Status::Ok();
  }
  const int64_t page = a.k_cache.shape[1];
  if (page < 1 || page % kPageMultiple != 0) {
    return Status::Invalid(msg("k_cache: page_size (dim 1) is ", page, " but a paged cache needs a multiple of ",
                               kPageMultiple));
  }
  if (a.page_table.batch != b) {
    return Status::Invalid(msg("page_table: has ", a.page_table.batch, " rows but batch is ", b));
  }
  if (a.page_table.pages_per_seq < 1) {
    return Status::Invalid(msg("page_table: pages_per_seq must be >= 1 but got ", a.page_table.pages_per_seq));
  }
  if (page * a.page_table.pages_per_seq > INT32_MAX) {
    return Status::Invalid(msg("page_table: ", a.page_table.pages_per_seq, " pages of ", page, " positions give a sequence ",
                               page * a.page_table.pages_per_seq, " positions, but positions are limited to 2^31 - 1"));
  }
  if (a.cache_batch_idx.defined()) {
    return Status::Invalid("cache_batch_idx: not allowed with a paged cache (the page table already maps "
                           "each sequence to its pages)");
  }
  if (a.cache_leftpad.defined()) {
    return Status::Unsupported("cache_leftpad: not supported with a paged cache (as in FlashAttention)");
  }
  return Status::Ok();
}

// k_new / v_new: both or neither, shapes like q's batch and the cache's heads; need cache_seqlens.
Status check_new_tokens(const KvCacheArgs& a) {
  if (a.k_new.defined() != a.v_new.defined()) {
    return Status::Invalid(a.k_new.defined() ? "v_new: missing (k_new and v_new come together)"
                                             : "k_new: missing (k_new and v_new come together)");
  }
  if (!a.k_new.defined()) return Status::Ok();
  if (!a.cache_seqlens.defined()) {
    return Status::Invalid("cache_seqlens: required with k_new/v_new (it says where they are appended)");
  }
  const int64_t b = a.q.shape[0], hkv = a.k_cache.shape[2];
  Status st = check_form("k_new", a.k_new, 4, "(batch, seqlen_new, heads_kv, head_dim)");
  if (st.ok()) st = check_form("v_new", a.v_new, 4, "(batch, seqlen_new, heads_kv, head_dim_v)");
  if (st.ok()) st = check_dtype("k_new", a.k_new, a.q.dtype, "q and the new keys share a dtype");
  if (st.ok()) st = check_dtype("v_new", a.v_new, a.q.dtype, "q and the new values share a dtype");
  if (st.ok()) {
    st = check_shape("k_new", a.k_new, {b, a.k_new.shape[1], hkv, a.q.shape[3]},
                     "(batch of q, seqlen_new, heads_kv of k_cache, head_dim of q)");
  }
  if (st.ok()) {
    st = check_shape("v_new", a.v_new, {b, a.k_new.shape[1], hkv, a.v_cache.shape[3]},
                     "(batch of q, seqlen_new of k_new, heads_kv of k_cache, head_dim_v of v_cache)");
  }
  // The append writes the cache in place: a broadcast (stride 0) dim would make several slots one memory row.
  for (auto [t, name] : {std::pair{&a.k_cache, "k_cache"}, std::pair{&a.v_cache, "v_cache"}}) {
    for (int i = 0; st.ok() && i < 3; ++i) {
      if (t->shape[i] > 1 && t->stride[i] == 0) {
        st = Status::Invalid(msg(name, ": dim ", i, " has stride 0 (a broadcast view) but k_new / v_new are "
                                 "appended into the cache in place, which needs a slot of its own for every position"));
      }
    }
  }
  return st;
}

// Positions: appended key i sits at cache_seqlens + i (< capacity, as the append needs); q row i is rotated there
// too when causal or a window is set (FlashAttention's rule), so rows past seqlen_new reach capacity + seqlen_q -
// seqlen_new - 1 at most. A shape rule: the GPU path does not read cache_seqlens on the host.
Status check_rotary(const KvCacheArgs& a, const KvCachePlan& p) {
  if (a.rotary_cos.defined() != a.rotary_sin.defined()) {
    return Status::Invalid(a.rotary_cos.defined() ? "rotary_sin: missing (rotary_cos and rotary_sin come together)"
                                                  : "rotary_cos: missing (rotary_cos and rotary_sin come together)");
  }
  if (!a.rotary_cos.defined()) return Status::Ok();
  if (!a.k_new.defined()) {
    return Status::Invalid("rotary_cos: needs k_new/v_new (the rotary embedding is applied to q and the "
                           "appended keys, as in FlashAttention)");
  }
  Status st = check_form("rotary_cos", a.rotary_cos, 2, "(seqlen_ro, rotary_dim / 2)");
  if (st.ok()) st = check_form("rotary_sin", a.rotary_sin, 2, "(seqlen_ro, rotary_dim / 2)");
  if (st.ok()) st = check_dtype("rotary_cos", a.rotary_cos, a.q.dtype, "cos/sin have q's dtype");
  if (st.ok()) st = check_dtype("rotary_sin", a.rotary_sin, a.q.dtype, "cos/sin have q's dtype");
  if (st.ok()) {
    st = check_shape("rotary_sin", a.rotary_sin, {a.rotary_cos.shape[0], a.rotary_cos.shape[1]},
                     "(shape of rotary_cos)");
  }
  if (!st.ok()) return st;
  const int64_t rot = 2 * a.rotary_cos.shape[1];
  if (rot < kRotaryMultiple || rot % kRotaryMultiple != 0 || rot > a.q.shape[3]) {
    return Status::Invalid(msg("rotary_cos: rotary_dim (2 * dim 1) is ", rot, " but must be a multiple of ",
                               kRotaryMultiple, " in [", kRotaryMultiple, ", head_dim ", a.q.shape[3], "]"));
  }
  if (a.rotary_cos.shape[0] < p.capacity) {
    return Status::Invalid(msg("rotary_cos: has ", a.rotary_cos.shape[0],
                               " positions but the cache holds ", p.capacity, " (seqlen_ro >= cache capacity)"));
  }
  const int64_t q_past_new = p.q_rows_advance ? std::max<int64_t>(0, int64_t(p.seqlen_q) - p.seqlen_new) : 0;
  if (a.rotary_cos.shape[0] < int64_t(p.capacity) + q_past_new) {
    return Status::Invalid(msg("rotary_cos: has ", a.rotary_cos.shape[0], " positions but needs ",
                               int64_t(p.capacity) + q_past_new, ": with causal or a window, q row i is rotated at "
                               "position cache_seqlens + i, so seqlen_q ", p.seqlen_q, " > seqlen_new ", p.seqlen_new,
                               " needs seqlen_ro >= cache capacity ", p.capacity, " + seqlen_q - seqlen_new"));
  }
  return Status::Ok();
}

Status check_index_sizes(const KvCacheArgs& a) {
  const int64_t b = a.q.shape[0];
  const std::pair<const char*, const IndexArray*> arrays[] = {
      {"cache_seqlens", &a.cache_seqlens}, {"cache_batch_idx", &a.cache_batch_idx}, {"cache_leftpad", &a.cache_leftpad}};
  for (const auto& [name, arr] : arrays) {
    if (arr->defined() && arr->size != b) {
      return Status::Invalid(msg(name, ": has ", arr->size, " entries but batch is ", b));
    }
  }
  return Status::Ok();
}

Status check_devices(const KvCacheArgs& a, Backend be) {
  const std::pair<const char*, const Tensor*> tensors[] = {
      {"k_cache", &a.k_cache}, {"v_cache", &a.v_cache}, {"out", &a.out},        {"lse", &a.lse},
      {"k_new", &a.k_new},     {"v_new", &a.v_new},     {"rotary_cos", &a.rotary_cos}, {"rotary_sin", &a.rotary_sin}};
  for (const auto& [name, t] : tensors) {
    if (!t->defined()) continue;
    if (Status st = check_device(name, *t, a.q); !st.ok()) return st;
  }
  return check_backend_device(a.q, be);
}

Status read_kv_indices(const KvCacheArgs& a, KvCachePlan* p) {
  const Device dev = a.q.device;
  p->index_read = false;
  if (dev != Device::CPU && !a.check_index_arrays) return Status::Ok();
  const IndexArray pages{a.page_table.data, a.page_table.batch * a.page_table.pages_per_seq};
  Status st = copy_to_host(a.cache_seqlens, dev, "cache_seqlens", &p->seqlens);
  if (st.ok()) st = copy_to_host(a.cache_batch_idx, dev, "cache_batch_idx", &p->batch_idx);
  if (st.ok()) st = copy_to_host(a.cache_leftpad, dev, "cache_leftpad", &p->leftpad);
  if (st.ok()) st = copy_to_host(pages, dev, "page_table", &p->pages);
  p->index_read = st.ok();
  return st;
}

// Contents: every appended token fits, leftpad within the cached tokens, rows and pages exist.
Status check_index_contents(const KvCacheArgs& a, const KvCachePlan& p) {
  if (!p.index_read) return Status::Ok();
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t n = p.cached(b);
    if (!p.seqlens.empty() && (n < 0 || n + p.seqlen_new > p.capacity)) {
      return Status::Invalid(msg("cache_seqlens: entry ", b, " is ", n, " but must be in [0, ",
                                 p.capacity - p.seqlen_new, "] (cache capacity ", p.capacity,
                                 " minus seqlen_new ", p.seqlen_new, ")"));
    }
    if (!p.leftpad.empty() && (p.leftpad[size_t(b)] < 0 || p.leftpad[size_t(b)] > n)) {
      return Status::Invalid(msg("cache_leftpad: entry ", b, " is ", p.leftpad[size_t(b)],
                                 " but must be in [0, cache_seqlens = ", n, "]"));
    }
    if (!p.batch_idx.empty() && (p.batch_idx[size_t(b)] < 0 || p.batch_idx[size_t(b)] >= a.k_cache.shape[0])) {
      return Status::Invalid(msg("cache_batch_idx: entry ", b, " is ", p.batch_idx[size_t(b)],
                                 " but the cache has ", a.k_cache.shape[0], " batch rows"));
    }
    if (p.page_size > 0) {
      const int64_t used_pages = (n + p.seqlen_new + p.page_size - 1) / p.page_size;
      for (int64_t i = 0; i < used_pages; ++i) {
        const int32_t page = p.pages[size_t(b * p.pages_per_seq + i)];
        if (page < 0 || page >= a.k_cache.shape[0]) {
          return Status::Invalid(msg("page_table: entry (", b, ", ", i, ") is ", page, " but the cache has ",
                                     a.k_cache.shape[0], " pages"));
        }
      }
    }
  }
  return Status::Ok();
}

// An appended slot (cache row or page row) belongs to the sequence that writes it, at one position:
// no other batch entry may write or read it, and the entry itself may not reach it as another
// position through a page listed twice. Two writes to one slot leave whichever lands last; an entry
// reading another's new token sees it here (the append runs before the attention) but not in
// FlashAttention, whose kernel appends as it reads. Both are refused rather than left to the order.
// Only where entries can share storage: cache_batch_idx or a page table, with an append. `rows`: the
// cache's dim 0 (pages or cache rows). Linear in the pages (or rows) the entries use.
Status check_append_owners(const KvCachePlan& p, int64_t rows) {
  if (!p.index_read || p.seqlen_new == 0 || (p.page_size == 0 && p.batch_idx.empty())) return Status::Ok();
  struct Run {
    int64_t lo, hi, b, shift;  // slots [lo, hi) of one page or row, entry b's positions [lo + shift, hi + shift)
    int32_t next;              // the next run written into the same page or row, or -1
  };
  // A sequence's positions [lo, hi) as runs within its cache row or pages: fn(storage row, Run).
  auto for_runs = [&](int64_t b, int64_t lo, int64_t hi, auto&& fn) {
    const int64_t step = p.page_size > 0 ? p.page_size : p.capacity;
    for (int64_t pos = lo; pos < hi; pos = (pos / step + 1) * step) {
      const KvCachePlan::Slot s = p.slot(b, pos);
      const int64_t n = std::min(hi, (pos / step + 1) * step) - pos;
      if (Status st = fn(s.row, Run{s.pos, s.pos + n, b, pos - s.pos, -1}); !st.ok()) return st;
    }
    return Status::Ok();
  };
  std::vector<int32_t> first(size_t(std::max<int64_t>(rows, 0)), -1);
  std::vector<Run> written;
  for (int64_t b = 0; b < p.batch; ++b) {
    (void)for_runs(b, p.cached(b), p.cached(b) + p.seqlen_new, [&](int64_t row, Run w) {
      w.next = first[size_t(row)];
      first[size_t(row)] = int32_t(written.size());
      written.push_back(w);
      return Status::Ok();
    });
  }
  const char* name = p.page_size > 0 ? "page_table" : "cache_batch_idx";
  const char* storage = p.page_size > 0 ? "page" : "cache row";
  for (int64_t b = 0; b < p.batch; ++b) {
    Status st = for_runs(b, p.first_key(b), p.cached(b) + p.seqlen_new, [&](int64_t row, const Run& r) {
      for (int32_t i = first[size_t(row)]; i >= 0; i = written[size_t(i)].next) {
        const Run& w = written[size_t(i)];
        if (w.lo >= r.hi || r.lo >= w.hi || (w.b == b && w.shift == r.shift)) continue;
        if (w.b == b) {
          return Status::Invalid(msg(name, ": batch entry ", b, " reaches ", storage, " ", row,
                                     " twice: its append writes positions [", w.lo + w.shift, ", ", w.hi + w.shift,
                                     ") into slots that also hold its positions [", r.lo + r.shift, ", ",
                                     r.hi + r.shift, ")"));
        }
        return Status::Invalid(msg(name, ": batch entries ", w.b, " and ", b, " share ", storage, " ", row,
                                   ", where entry ", w.b, " appends positions [", w.lo, ", ", w.hi, ") and entry ", b,
                                   " uses [", r.lo, ", ", r.hi, "): an appended slot must belong to one sequence"));
      }
      return Status::Ok();
    });
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

Status prepare_kvcache(const KvCacheArgs& a, KvCachePlan* p) {
  const bool paged = a.page_table.defined();
  Status st = check_scalars(attention_scalars(a, a.backend));  // the forward's rules and names
  if (st.ok()) st = check_main_tensors(a, paged);
  if (st.ok()) st = check_cache_layout(a, paged);
  if (st.ok()) st = check_new_tokens(a);
  if (!st.ok()) return st;

  p->batch = int32_t(a.q.shape[0]);
  p->seqlen_q = int32_t(a.q.shape[1]);
  p->heads_q = int32_t(a.q.shape[2]);
  p->heads_kv = int32_t(a.k_cache.shape[2]);
  p->head_dim = int32_t(a.q.shape[3]);
  p->head_dim_v = int32_t(a.v_cache.shape[3]);
  p->seqlen_new = a.k_new.defined() ? int32_t(a.k_new.shape[1]) : 0;
  p->page_size = paged ? int32_t(a.k_cache.shape[1]) : 0;
  p->pages_per_seq = paged ? int32_t(a.page_table.pages_per_seq) : 0;
  p->capacity = paged ? p->page_size * p->pages_per_seq : int32_t(a.k_cache.shape[1]);
  p->rotary_dim = a.rotary_cos.defined() ? int32_t(2 * a.rotary_cos.shape[1]) : 0;
  p->q_rows_advance = a.causal || a.window_left >= 0 || a.window_right >= 0;
  p->scale = std::isnan(a.softmax_scale) ? float(1.0 / std::sqrt(double(p->head_dim))) : a.softmax_scale;
  AttnArgs for_backend;
  for_backend.q = a.q;
  for_backend.backend = a.backend;
  p->backend = resolve_backend(for_backend);

  st = check_rotary(a, *p);
  if (st.ok()) st = check_index_sizes(a);
  if (st.ok()) st = check_devices(a, p->backend);
  if (st.ok()) st = read_kv_indices(a, p);
  if (st.ok()) st = check_index_contents(a, *p);
  if (st.ok()) st = check_append_owners(*p, a.k_cache.shape[0]);
  return st;
}

}  // namespace fastattn::detail
