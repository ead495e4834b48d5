// forward_kvcache(): validate and plan, then the host path (append, rotate q, gather what is not
// a plain contiguous cache, attention through the CPU or reference forward) or the CUDA path
// (kvcache_cuda.cpp).
#include <algorithm>
#include <vector>

#include "api/kvcache_cuda.h"
#include "api/kvcache_plan.h"
#include "api/validate.h"
#include "cpu/cpu_kvcache.h"
#include "fastattn/fastattn.h"

namespace fastattn {
namespace detail {

Status as_cache_error(Status st) {
  for (const char* name : {"k", "v"}) {
    const std::string prefix = std::string(name) + ":";
    if (st.message.rfind(prefix, 0) == 0) {
      st.message = std::string(name) + "_cache (the attention's " + name + "):" + st.message.substr(prefix.size());
    }
  }
  return st;
}

AttnArgs attention_scalars(const KvCacheArgs& a, Backend be) {
  AttnArgs s;
  s.softmax_scale = a.softmax_scale;
  s.causal = a.causal;
  s.window_left = a.window_left;
  s.window_right = a.window_right;
  s.softcap = a.softcap;
  s.backend = be;
  s.num_threads = a.num_threads;
  s.num_splits = a.num_splits;
  s.alibi_slopes = a.alibi_slopes;  // the attention's keys are the sequence's from its left padding: FA's j
  return s;
}

namespace {

// A contiguous cache read in place (sequence b = row b, keys from position 0) needs no gather.
bool reads_cache_in_place(const KvCacheArgs& a, const KvCachePlan& p) {
  return p.page_size == 0 && p.batch_idx.empty() && p.leftpad.empty() && !a.cache_batch_idx.defined() &&
         !a.cache_leftpad.defined();
}

Status host_kvcache(const KvCacheArgs& a, const KvCachePlan& p) {
  std::vector<int32_t> keys(size_t(p.batch));
  int64_t max_keys = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    keys[size_t(b)] = p.keys(b);
    max_keys = std::max<int64_t>(max_keys, keys[size_t(b)]);
  }
  const bool in_place = reads_cache_in_place(a, p);
  const int64_t es = dtype_size(a.q.dtype);
  const int64_t gathered = in_place ? 0 : p.batch * max_keys * p.heads_kv;
  std::vector<char> q_rot(p.rotary_dim > 0 ? size_t(a.q.numel() * es) : 0);
  std::vector<char> k(size_t(gathered * p.head_dim * es)), v(size_t(gathered * p.head_dim_v * es));

  AttnArgs att = attention_scalars(a, p.backend);
  att.q = p.rotary_dim > 0 ? make_tensor(q_rot.data(), a.q.dtype, {p.batch, p.seqlen_q, p.heads_q, p.head_dim}) : a.q;
  if (in_place) {  // the cache's first `batch` rows, seqused_k = the key counts
    att.k = a.k_cache;
    att.v = a.v_cache;
    att.k.shape[0] = att.v.shape[0] = p.batch;
  } else {
    att.k = make_tensor(k.data(), a.q.dtype, {p.batch, max_keys, p.heads_kv, p.head_dim});
    att.v = make_tensor(v.data(), a.q.dtype, {p.batch, max_keys, p.heads_kv, p.head_dim_v});
  }
  att.out = a.out;
  att.lse = a.lse;
  att.seqused_k = {keys.data(), int64_t(keys.size())};
  Prepared prep;  // the attention's checks before the cache is written
  if (Status st = prepare_forward(att, &prep); !st.ok()) return as_cache_error(st);

  cpu::kvcache_append(p, a);
  if (p.rotary_dim > 0) cpu::kvcache_rotate_q(p, a, q_rot.data());
  if (!in_place) cpu::kvcache_gather(p, a, max_keys, k.data(), v.data());
  return run_forward(att, prep, nullptr);
}

}  // namespace
}  // namespace detail

Status validate_kvcache(const KvCacheArgs& args) {
  detail::KvCachePlan p;
  return detail::prepare_kvcache(args, &p);
}

Status forward_kvcache(const KvCacheArgs& args, void* stream) {
  detail::KvCachePlan p;
  Status st = detail::prepare_kvcache(args, &p);
  if (!st.ok()) return st;
  if (p.backend == Backend::CUDA) return detail::cuda_kvcache(args, p, stream);
  return detail::host_kvcache(args, p);
}

size_t kvcache_workspace_bytes(const KvCacheArgs& args) {
  detail::KvCachePlan p;
  if (!detail::prepare_kvcache(args, &p).ok() || p.backend != Backend::CUDA) return 0;
  return detail::cuda_kvcache_workspace(args, p);
}

}  // namespace fastattn
