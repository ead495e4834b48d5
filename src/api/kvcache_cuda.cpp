// forward_kvcache on the CUDA backend (see kvcache_cuda.h). Every check, including the
// attention's own on the final operands, runs before the cache is written.
#include "api/kvcache_cuda.h"

#include <algorithm>
#include <utility>

#include "api/message.h"
#include "api/validate.h"
#include "cuda/tma_stride_rule.h"
#include "cuda/splitd_rule.h"
#include "fastattn/fastattn.h"

#ifdef FASTATTN_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#include "cuda/kvcache_append.h"
#include "cuda/stream_alloc.h"
#endif

namespace fastattn::detail {
namespace {

constexpr size_t kAlign = 256;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t keys_bytes(const KvCachePlan& p) { return round_up(size_t(p.batch) * sizeof(int32_t)); }

size_t q_rot_bytes(const KvCacheArgs& a, const KvCachePlan& p) {
  return p.rotary_dim > 0 ? round_up(size_t(a.q.numel()) * dtype_size(a.q.dtype)) : 0;
}

}  // namespace

size_t cuda_kvcache_workspace(const KvCacheArgs& a, const KvCachePlan& p) {
  return keys_bytes(p) + q_rot_bytes(a, p);
}

Status check_cuda_cache_strides(const KvCacheArgs& a) {
  // In place, the maps' outer dim is every row or page of the cache; else the first `batch` rows.
  const bool in_place = a.page_table.defined() || a.cache_batch_idx.defined() || a.cache_leftpad.defined();
  for (auto [t, name] : {std::pair{&a.k_cache, "k_cache"}, std::pair{&a.v_cache, "v_cache"}}) {
    if (t->numel() == 0) continue;  // nothing is read
    const int64_t esz = dtype_size(t->dtype);
    for (int i = 0; i + 1 < t->ndim; ++i) {
      const int64_t extent = i == 0 && !in_place ? std::min(t->shape[0], a.q.shape[0]) : t->shape[i];
      if (!cuda_backend::tma_stride_ok(extent, t->stride[i], esz)) {
        return Status::Unsupported(msg(name, ": dim ", i, " has stride ", t->stride[i],
                                       " but the CUDA forward reads the cache with TMA, which needs the strides "
                                       "of dims longer than 1 (dim 0: pages or rows, all of them where the cache "
                                       "is addressed in place through page_table, cache_batch_idx or "
                                       "cache_leftpad) to be positive multiples of 16 bytes (the cache is written "
                                       "in place, never copied: allocate it so)"));
      }
    }
  }
  return Status::Ok();
}

namespace {

// Nothing to append, rotate or shift: each sequence's keys are its cache_seqlens (or the whole
// capacity), so the attention reads them as they are, with no preparing launch and no workspace
// (a decode step over a cache the caller filled, e.g. transformers' StaticCache).
bool reads_cache_as_is(const KvCacheArgs& a, const KvCachePlan& p) {
  return !a.k_new.defined() && p.rotary_dim == 0 && !a.cache_leftpad.defined();
}

}  // namespace

#ifdef FASTATTN_WITH_CUDA
namespace {

cuda_backend::RowView view4(const Tensor& t) {
  return {t.data, t.stride[0], t.stride[1], t.stride[2]};
}

// The cache as the attention's k/v for its checks: (batch, capacity, h_kv, d) with the cache's
// strides. A contiguous cache without cache_batch_idx or leftpad is read as exactly that (its first
// `batch` rows); otherwise the forward addresses the cache itself through cache_layout.
Tensor as_attention_operand(Tensor t, const KvCachePlan& p) {
  t.shape[0] = p.batch;
  t.shape[1] = p.capacity;
  return t;
}

CacheLayout cache_layout(const KvCacheArgs& a, const KvCachePlan& p) {
  CacheLayout c;
  if (!a.page_table.defined() && !a.cache_batch_idx.defined() && !a.cache_leftpad.defined()) return c;
  c.batch_idx = a.cache_batch_idx.data;
  c.leftpad = a.cache_leftpad.data;
  c.page_table = a.page_table.data;
  c.pages_per_seq = p.pages_per_seq;
  c.page_size = p.page_size;
  c.rows = a.k_cache.shape[0];
  c.positions = a.k_cache.shape[1];
  return c;
}

cuda_backend::KvAppendParams append_params(const KvCacheArgs& a, const KvCachePlan& p, char* ws) {
  cuda_backend::KvAppendParams k;
  k.dtype = a.q.dtype;
  k.batch = p.batch;
  k.seqlen_q = p.seqlen_q;
  k.heads_q = p.heads_q;
  k.heads_kv = p.heads_kv;
  k.head_dim = p.head_dim;
  k.head_dim_v = p.head_dim_v;
  k.seqlen_new = p.seqlen_new;
  k.capacity = p.capacity;
  k.k_cache = view4(a.k_cache);
  k.v_cache = view4(a.v_cache);
  k.page_table = a.page_table.data;
  k.pages_per_seq = p.pages_per_seq;
  k.page_size = p.page_size;
  k.batch_idx = a.cache_batch_idx.data;
  k.seqlens = a.cache_seqlens.data;
  k.leftpad = a.cache_leftpad.data;
  if (a.k_new.defined()) {
    k.k_new = view4(a.k_new);
    k.v_new = view4(a.v_new);
  }
  if (p.rotary_dim > 0) {
    k.cos = {a.rotary_cos.data, a.rotary_cos.stride[0], 0, 0};
    k.sin = {a.rotary_sin.data, a.rotary_sin.stride[0], 0, 0};
    k.q = view4(a.q);
    k.q_rotated = ws + keys_bytes(p);
  }
  k.rotary_dim = p.rotary_dim;
  k.interleaved = a.rotary_interleaved;
  k.q_rows_advance = p.q_rows_advance;
  k.keys = reinterpret_cast<int32_t*>(ws);
  return k;
}

Status run(const KvCacheArgs& a, const KvCachePlan& p, char* ws, void* stream) {
  // Head dims above 256 run the split-D forward, which reads K and V as plain tensors: a contiguous
  // cache (its first `batch` rows) with cache_seqlens and k_new / v_new appended, yes; rows by
  // cache_batch_idx, left padding or pages (the forward would address the cache itself) and rotary
  // (untested at d_qk != d_v) not yet: refused before anything is appended.
  if (cuda_backend::splitd_dims(p.head_dim, p.head_dim_v)) {
    const char* what = a.page_table.defined()        ? "page_table: a paged cache"
                       : a.cache_batch_idx.defined() ? "cache_batch_idx: cache rows by index"
                       : a.cache_leftpad.defined()   ? "cache_leftpad: left-padded caches"
                       : p.rotary_dim > 0            ? "rotary_cos: rotary embedding"
                                                     : nullptr;
    if (what != nullptr)
      return Status::Unsupported(msg(what, " at head_dim ", p.head_dim, p.head_dim_v != p.head_dim ? "/" : "",
                                     p.head_dim_v != p.head_dim ? std::to_string(p.head_dim_v) : std::string(),
                                     " is not supported by the CUDA KV-cache forward (the split-D forward, ",
                                     cuda_backend::splitd_dims_text(),
                                     ", takes contiguous caches with cache_seqlens and k_new / v_new only)"));
  }
  const cuda_backend::KvAppendParams k = append_params(a, p, ws);
  AttnArgs att = attention_scalars(a, Backend::CUDA);
  att.q = p.rotary_dim > 0 ? make_tensor(k.q_rotated, a.q.dtype, {p.batch, p.seqlen_q, p.heads_q, p.head_dim},
                                         Device::CUDA, a.q.device_index)
                           : a.q;
  att.k = as_attention_operand(a.k_cache, p);
  att.v = as_attention_operand(a.v_cache, p);
  att.out = a.out;
  att.lse = a.lse;
  const bool as_is = reads_cache_as_is(a, p);
  if (as_is) {
    att.seqused_k = a.cache_seqlens;  // undefined: every sequence holds the whole capacity
  } else {
    att.seqused_k = {k.keys, p.batch};
  }
  att.check_index_arrays = false;  // the key counts are written on the device just before
  Prepared prep;  // the attention's checks before the cache is written
  // The caches' own rule first: check_forward's on the attention operand would advise a copy.
  if (Status st = check_cuda_cache_strides(a); !st.ok()) return st;
  if (Status st = prepare_forward(att, &prep); !st.ok()) return as_cache_error(st);
  prep.problem.cache = cache_layout(a, p);
  prep.problem.kvcache_call = true;
  if (!as_is) {
    if (Status st = cuda_backend::kvcache_append(k, stream); !st.ok()) return st;
  }
  return run_forward(att, prep, stream);
}

}  // namespace

Status cuda_kvcache(const KvCacheArgs& a, const KvCachePlan& p, void* stream) {
  const size_t need = cuda_kvcache_workspace(a, p);
  if (a.workspace != nullptr) {
    if (a.workspace_bytes < need) {
      return Status::Invalid(msg("workspace: ", a.workspace_bytes, " bytes but this call needs ", need,
                                 " (kvcache_workspace_bytes)"));
    }
    if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0) {
      return Status::Invalid("workspace: must be 16-byte aligned");
    }
    return run(a, p, static_cast<char*>(a.workspace), stream);
  }
  if (reads_cache_as_is(a, p)) return run(a, p, nullptr, stream);
  auto s = static_cast<cudaStream_t>(stream);
  void* ws = nullptr;
  if (Status st = cuda_backend::stream_alloc(need, s, "workspace", &ws); !st.ok()) return st;
  Status st = run(a, p, static_cast<char*>(ws), stream);
  cuda_backend::stream_free(ws, s);
  return st;
}

#else

Status cuda_kvcache(const KvCacheArgs&, const KvCachePlan&, void*) {
  return Status::Unsupported("backend cuda: fastattn was built without CUDA");
}

#endif

}  // namespace fastattn::detail
