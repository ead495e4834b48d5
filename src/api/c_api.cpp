// The C ABI: converts plain C structs to the C++ API and keeps the last error per thread.
#include "fastattn/c_api.h"

#include <cmath>
#include <exception>
#include <string>

#include "fastattn/fastattn.h"

namespace {

thread_local std::string g_last_error;

int finish(const fastattn::Status& st) {
  g_last_error = st.message;
  return static_cast<int>(st.code);
}

// False (with the error set) when the C tensor cannot even be described as a Tensor.
bool to_tensor(const char* name, const fastattn_tensor& c, fastattn::Tensor* t) {
  if (c.ndim < 0 || c.ndim > 4) {
    g_last_error = std::string(name) + ": ndim " + std::to_string(c.ndim) + " out of range 0..4";
    return false;
  }
  t->data = c.data;
  t->ndim = c.ndim;
  for (int i = 0; i < 4; ++i) {
    t->shape[i] = i < c.ndim ? c.shape[i] : 0;
    t->stride[i] = i < c.ndim ? c.stride[i] : 0;
  }
  t->dtype = static_cast<fastattn::DType>(c.dtype);
  t->device = static_cast<fastattn::Device>(c.device);
  t->device_index = c.device_index;
  return true;
}

bool to_args(const fastattn_args* c, fastattn::AttnArgs* a) {
  if (c == nullptr) {
    g_last_error = "args: null pointer";
    return false;
  }
  if (!to_tensor("q", c->q, &a->q) || !to_tensor("k", c->k, &a->k) || !to_tensor("v", c->v, &a->v) ||
      !to_tensor("out", c->out, &a->out)) {
    return false;
  }
  if (c->lse.data != nullptr && !to_tensor("lse", c->lse, &a->lse)) return false;
  const int64_t batch_from_cu = c->cu_seqlens_size > 0 ? c->cu_seqlens_size - 1 : 0;
  const int64_t batch = c->cu_seqlens_q != nullptr ? batch_from_cu : (c->q.ndim > 0 ? c->q.shape[0] : 0);
  a->cu_seqlens_q = {c->cu_seqlens_q, c->cu_seqlens_q ? c->cu_seqlens_size : 0};
  a->cu_seqlens_k = {c->cu_seqlens_k, c->cu_seqlens_k ? c->cu_seqlens_size : 0};
  a->seqused_q = {c->seqused_q, c->seqused_q ? batch : 0};
  a->seqused_k = {c->seqused_k, c->seqused_k ? batch : 0};
  a->max_seqlen_q = c->max_seqlen_q;
  a->max_seqlen_k = c->max_seqlen_k;
  a->check_index_arrays = c->check_index_arrays != 0;
  a->softmax_scale = c->softmax_scale;
  a->causal = c->causal != 0;
  a->window_left = c->window_left;
  a->window_right = c->window_right;
  a->softcap = c->softcap;
  a->deterministic = c->deterministic != 0;
  a->backend = static_cast<fastattn::Backend>(c->backend);
  a->num_threads = c->num_threads;
  a->num_splits = c->num_splits;
  const fastattn_block_mask& m = c->block_mask;
  if (m.data != nullptr) {
    a->mask.kind = fastattn::MaskKind::BlockSparse;
    fastattn::BlockMask& b = a->mask.blocks;
    b.data = m.data;
    for (int i = 0; i < 4; ++i) {
      b.shape[i] = m.shape[i];
      b.stride[i] = m.stride[i];
    }
    b.device = static_cast<fastattn::Device>(m.device);
    b.device_index = m.device_index;
    b.block_q = m.block_q;
    b.block_k = m.block_k;
  }
  const fastattn_bit_mask& bm = c->bit_mask;
  if (bm.data != nullptr) {  // with a block mask too, validation refuses the pair by name
    if (m.data == nullptr) a->mask.kind = fastattn::MaskKind::DenseBitmask;
    fastattn::BitMask& w = a->mask.bits;
    w.data = bm.data;
    for (int i = 0; i < 4; ++i) w.shape[i] = bm.shape[i];
    for (int i = 0; i < 3; ++i) w.stride[i] = bm.stride[i];
    w.device = static_cast<fastattn::Device>(bm.device);
    w.device_index = bm.device_index;
  }
  if (c->bias.data != nullptr && !to_tensor("bias", c->bias, &a->bias)) return false;
  if (c->dbias.data != nullptr && !to_tensor("dbias", c->dbias, &a->dbias)) return false;
  if (c->alibi_slopes.data != nullptr && !to_tensor("alibi_slopes", c->alibi_slopes, &a->alibi_slopes)) return false;
  return true;
}

bool to_kvcache_args(const fastattn_kvcache_args* c, fastattn::KvCacheArgs* a) {
  if (c == nullptr) {
    g_last_error = "args: null pointer";
    return false;
  }
  const std::pair<const char*, std::pair<const fastattn_tensor*, fastattn::Tensor*>> tensors[] = {
      {"q", {&c->q, &a->q}},           {"k_cache", {&c->k_cache, &a->k_cache}},
      {"v_cache", {&c->v_cache, &a->v_cache}}, {"k_new", {&c->k_new, &a->k_new}},
      {"v_new", {&c->v_new, &a->v_new}}, {"out", {&c->out, &a->out}},
      {"lse", {&c->lse, &a->lse}},     {"rotary_cos", {&c->rotary_cos, &a->rotary_cos}},
      {"rotary_sin", {&c->rotary_sin, &a->rotary_sin}}, {"alibi_slopes", {&c->alibi_slopes, &a->alibi_slopes}}};
  for (const auto& [name, pair] : tensors) {
    const bool required = std::string(name) == "q" || std::string(name) == "k_cache" ||
                          std::string(name) == "v_cache" || std::string(name) == "out";
    if ((required || pair.first->data != nullptr) && !to_tensor(name, *pair.first, pair.second)) return false;
  }
  auto index = [&](const int32_t* p) { return fastattn::IndexArray{p, p ? c->batch : 0}; };
  a->cache_seqlens = index(c->cache_seqlens);
  a->cache_batch_idx = index(c->cache_batch_idx);
  a->cache_leftpad = index(c->cache_leftpad);
  a->page_table = {c->page_table, c->page_table ? c->batch : 0, c->page_table ? c->pages_per_seq : 0};
  a->rotary_interleaved = c->rotary_interleaved != 0;
  a->softmax_scale = c->softmax_scale;
  a->causal = c->causal != 0;
  a->window_left = c->window_left;
  a->window_right = c->window_right;
  a->softcap = c->softcap;
  a->num_splits = c->num_splits;
  a->workspace = c->workspace;
  a->workspace_bytes = size_t(c->workspace_bytes);
  a->check_index_arrays = c->check_index_arrays != 0;
  a->backend = static_cast<fastattn::Backend>(c->backend);
  a->num_threads = c->num_threads;
  return true;
}

}  // namespace

extern "C" {

void fastattn_kvcache_args_init(fastattn_kvcache_args* args) {
  if (args == nullptr) return;
  *args = fastattn_kvcache_args{};
  args->rotary_interleaved = 1;
  args->softmax_scale = std::nanf("");
  args->window_left = -1;
  args->window_right = -1;
  args->check_index_arrays = 1;
  args->backend = FASTATTN_AUTO;
}

int fastattn_forward_kvcache(const fastattn_kvcache_args* args, void* stream) {
  try {
    fastattn::KvCacheArgs a;
    if (!to_kvcache_args(args, &a)) return FASTATTN_INVALID_ARGUMENT;
    return finish(fastattn::forward_kvcache(a, stream));
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return FASTATTN_INTERNAL;
  }
}

uint64_t fastattn_kvcache_workspace_bytes(const fastattn_kvcache_args* args) {
  try {
    fastattn::KvCacheArgs a;
    return to_kvcache_args(args, &a) ? uint64_t(fastattn::kvcache_workspace_bytes(a)) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

void fastattn_args_init(fastattn_args* args) {
  if (args == nullptr) return;
  *args = fastattn_args{};
  args->check_index_arrays = 1;
  args->softmax_scale = std::nanf("");
  args->window_left = -1;
  args->window_right = -1;
  args->backend = FASTATTN_AUTO;
  args->block_mask.block_q = 128;  // FlexAttention's default block, as fastattn::BlockMask
  args->block_mask.block_k = 128;
}

int fastattn_forward(const fastattn_args* args, void* stream) {
  try {
    fastattn::AttnArgs a;
    if (!to_args(args, &a)) return FASTATTN_INVALID_ARGUMENT;
    return finish(fastattn::forward(a, stream));
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return FASTATTN_INTERNAL;
  }
}

int fastattn_backward(const fastattn_args* args, const fastattn_tensor* dout,
                      const fastattn_tensor* dq, const fastattn_tensor* dk,
                      const fastattn_tensor* dv, void* stream) {
  try {
    fastattn::AttnArgs a;
    if (!to_args(args, &a)) return FASTATTN_INVALID_ARGUMENT;
    if (!dout || !dq || !dk || !dv) {
      g_last_error = "dout, dq, dk, dv: null tensor descriptor";
      return FASTATTN_INVALID_ARGUMENT;
    }
    fastattn::Tensor tdo, tdq, tdk, tdv;
    if (!to_tensor("dout", *dout, &tdo) || !to_tensor("dq", *dq, &tdq) ||
        !to_tensor("dk", *dk, &tdk) || !to_tensor("dv", *dv, &tdv)) {
      return FASTATTN_INVALID_ARGUMENT;
    }
    return finish(fastattn::backward(a, tdo, tdq, tdk, tdv, stream));
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return FASTATTN_INTERNAL;
  }
}

const char* fastattn_last_error(void) { return g_last_error.c_str(); }
int fastattn_cuda_available(void) { return fastattn::cuda_available() ? 1 : 0; }
const char* fastattn_version(void) { return fastattn::version(); }
int fastattn_abi_version(void) { return FASTATTN_ABI_VERSION; }
const char* fastattn_build_info(void) { return fastattn::build_info(); }

}  // extern "C"
