// fastattn._C: the C++ API behind DLPack arrays or plain-value views (views.h, the torch path). Callers allocate every output; nothing here
// allocates device memory, synchronizes or copies, so calls are safe inside CUDA graph capture.
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>

#include "convert.h"
#include "views.h"
#include "fastattn/fastattn.h"

namespace nb = nanobind;
using namespace nb::literals;
using fastattn_py::InArray;
using fastattn_py::OutArray;

namespace {

using OptIn = std::optional<InArray>;

// Everything in AttnArgs except the tensors, as the Python side passes it.
struct Options {
  OptIn cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k;
  int32_t max_seqlen_q = 0, max_seqlen_k = 0;
  float softmax_scale = 0.0f;
  bool causal = false;
  int32_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  bool check_index_arrays = true;
  int32_t backend = 0, num_threads = 0;
  bool deterministic = false;
  OptIn block_mask;  // 4-D bool / uint8 (mask_batch, mask_heads, q_blocks, k_blocks)
  int32_t block_q = 128, block_k = 128;
  OptIn bit_mask;    // 4-D 32-bit words (mask_batch, mask_heads, rows, words): an element bitmask
  OptIn bias;        // 4-D (bias_batch, bias_heads, rows, cols) float / bf16 / fp16: an additive score bias
  OptIn alibi_slopes;  // fp32 (heads_q) or (batch, heads_q): ALiBi, -slope * |i + s_k - s_q - j| added to the score
};

void init_options(Options* self, OptIn cu_seqlens_q, OptIn cu_seqlens_k, OptIn seqused_q,
                  OptIn seqused_k, int32_t max_seqlen_q, int32_t max_seqlen_k, float softmax_scale,
                  bool causal, int32_t window_left, int32_t window_right, float softcap,
                  bool check_index_arrays, int32_t backend, int32_t num_threads, bool deterministic,
                  OptIn block_mask, int32_t block_q, int32_t block_k, OptIn bit_mask, OptIn bias,
                  OptIn alibi_slopes) {
  new (self) Options{std::move(cu_seqlens_q), std::move(cu_seqlens_k), std::move(seqused_q),
                     std::move(seqused_k), max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                     window_left, window_right, softcap, check_index_arrays, backend, num_threads,
                     deterministic, std::move(block_mask), block_q, block_k, std::move(bit_mask), std::move(bias),
                     std::move(alibi_slopes)};
}

// A block mask on the args (MaskKind::BlockSparse); validation checks it against the call.
void set_block_mask(fastattn::AttnArgs& a, const fastattn::BlockMask& m) {
  a.mask.kind = fastattn::MaskKind::BlockSparse;
  a.mask.blocks = m;
}

fastattn::Backend to_backend(int32_t backend) {
  if (backend < 0 || backend > static_cast<int32_t>(fastattn::Backend::Reference))
    throw nb::value_error("backend: expected 0 (auto), 1 (cpu), 2 (cuda) or 3 (reference)");
  return static_cast<fastattn::Backend>(backend);
}

// The scalars AttnArgs and KvCacheArgs share (the mask, scale, softcap, checks, backend).
template <typename Args>
Args with_common_scalars(float softmax_scale, bool causal, int32_t window_left, int32_t window_right,
                         float softcap, bool check_index_arrays, int32_t backend, int32_t num_threads) {
  Args a;
  a.softmax_scale = softmax_scale;
  a.causal = causal;
  a.window_left = window_left;
  a.window_right = window_right;
  a.softcap = softcap;
  a.check_index_arrays = check_index_arrays;
  a.backend = to_backend(backend);
  a.num_threads = num_threads;
  return a;
}

// The scalar arguments of one call; tensors and index arrays are set by the caller.
fastattn::AttnArgs scalar_args(int32_t max_seqlen_q, int32_t max_seqlen_k, float softmax_scale, bool causal,
                               int32_t window_left, int32_t window_right, float softcap,
                               bool check_index_arrays, int32_t backend, int32_t num_threads,
                               bool deterministic) {
  auto a = with_common_scalars<fastattn::AttnArgs>(softmax_scale, causal, window_left, window_right, softcap,
                                                   check_index_arrays, backend, num_threads);
  a.max_seqlen_q = max_seqlen_q;
  a.max_seqlen_k = max_seqlen_k;
  a.deterministic = deterministic;
  return a;
}

fastattn::AttnArgs make_args(const InArray& q, const InArray& k, const InArray& v, const Options& o) {
  fastattn::AttnArgs a = scalar_args(o.max_seqlen_q, o.max_seqlen_k, o.softmax_scale, o.causal,
                                     o.window_left, o.window_right, o.softcap, o.check_index_arrays,
                                     o.backend, o.num_threads, o.deterministic);
  a.q = fastattn_py::to_tensor(q, "q");
  a.k = fastattn_py::to_tensor(k, "k");
  a.v = fastattn_py::to_tensor(v, "v");
  if (o.cu_seqlens_q) a.cu_seqlens_q = fastattn_py::to_index(*o.cu_seqlens_q, "cu_seqlens_q", a.q);
  if (o.cu_seqlens_k) a.cu_seqlens_k = fastattn_py::to_index(*o.cu_seqlens_k, "cu_seqlens_k", a.q);
  if (o.seqused_q) a.seqused_q = fastattn_py::to_index(*o.seqused_q, "seqused_q", a.q);
  if (o.seqused_k) a.seqused_k = fastattn_py::to_index(*o.seqused_k, "seqused_k", a.q);
  if (o.block_mask) set_block_mask(a, fastattn_py::to_block_mask(*o.block_mask, "block_mask", o.block_q, o.block_k));
  if (o.bit_mask) {  // with a block mask too, validation refuses the pair by name
    if (!o.block_mask) a.mask.kind = fastattn::MaskKind::DenseBitmask;
    a.mask.bits = fastattn_py::to_bit_mask(*o.bit_mask, "mask");
  }
  if (o.bias) a.bias = fastattn_py::to_tensor(*o.bias, "bias");
  if (o.alibi_slopes) a.alibi_slopes = fastattn_py::to_tensor(*o.alibi_slopes, "alibi_slopes");
  return a;
}

void* as_stream(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

void forward(const InArray& q, const InArray& k, const InArray& v, const OutArray& out,
             const std::optional<OutArray>& lse, const Options& o, uintptr_t stream) {
  fastattn::AttnArgs a = make_args(q, k, v, o);
  a.out = fastattn_py::to_tensor(out, "out");
  if (lse) a.lse = fastattn_py::to_tensor(*lse, "lse");
  fastattn::Status st;
  {
    nb::gil_scoped_release nogil;
    st = fastattn::forward(a, as_stream(stream));
  }
  fastattn_py::raise_if_error(st);
}

void backward(const InArray& dout, const InArray& q, const InArray& k, const InArray& v,
              const InArray& out, const InArray& lse, const OutArray& dq, const OutArray& dk,
              const OutArray& dv, const Options& o, uintptr_t stream, const std::optional<OutArray>& dbias) {
  fastattn::AttnArgs a = make_args(q, k, v, o);
  if (dbias) a.dbias = fastattn_py::to_tensor(*dbias, "dbias");
  a.out = fastattn_py::to_tensor(out, "out");
  a.lse = fastattn_py::to_tensor(lse, "lse");
  fastattn::Tensor tdout = fastattn_py::to_tensor(dout, "dout");
  fastattn::Tensor tdq = fastattn_py::to_tensor(dq, "dq");
  fastattn::Tensor tdk = fastattn_py::to_tensor(dk, "dk");
  fastattn::Tensor tdv = fastattn_py::to_tensor(dv, "dv");
  fastattn::Status st;
  {
    nb::gil_scoped_release nogil;
    st = fastattn::backward(a, tdout, tdq, tdk, tdv, as_stream(stream));
  }
  fastattn_py::raise_if_error(st);
}

// The same calls over plain-value views (views.h): the torch fast path. Index views may be None.
using fastattn_py::view_to_index;
using fastattn_py::view_to_tensor;

fastattn::AttnArgs view_args(nb::handle q, nb::handle k, nb::handle v, nb::handle cu_seqlens_q,
                             nb::handle cu_seqlens_k, nb::handle seqused_q, nb::handle seqused_k,
                             nb::handle block_mask, int32_t block_q, int32_t block_k, nb::handle bit_mask,
                             nb::handle bias, nb::handle alibi_slopes, fastattn::AttnArgs a) {
  a.q = view_to_tensor(q, "q");
  a.k = view_to_tensor(k, "k");
  a.v = view_to_tensor(v, "v");
  if (!cu_seqlens_q.is_none()) a.cu_seqlens_q = view_to_index(cu_seqlens_q, "cu_seqlens_q", a.q);
  if (!cu_seqlens_k.is_none()) a.cu_seqlens_k = view_to_index(cu_seqlens_k, "cu_seqlens_k", a.q);
  if (!seqused_q.is_none()) a.seqused_q = view_to_index(seqused_q, "seqused_q", a.q);
  if (!seqused_k.is_none()) a.seqused_k = view_to_index(seqused_k, "seqused_k", a.q);
  if (!block_mask.is_none()) {
    set_block_mask(a, fastattn_py::view_to_block_mask(block_mask, "block_mask", block_q, block_k));
  }
  if (!bit_mask.is_none()) {  // with a block mask too, validation refuses the pair by name
    a.mask.kind = fastattn::MaskKind::DenseBitmask;
    a.mask.bits = fastattn_py::view_to_bit_mask(bit_mask, "mask");
  }
  if (!bias.is_none()) a.bias = view_to_tensor(bias, "bias");
  if (!alibi_slopes.is_none()) a.alibi_slopes = view_to_tensor(alibi_slopes, "alibi_slopes");
  return a;
}

void forward_views(nb::handle q, nb::handle k, nb::handle v, nb::handle out, nb::handle lse,
                   nb::handle cu_seqlens_q, nb::handle cu_seqlens_k, nb::handle seqused_q,
                   nb::handle seqused_k, int32_t max_seqlen_q, int32_t max_seqlen_k, float softmax_scale,
                   bool causal, int32_t window_left, int32_t window_right, float softcap,
                   bool check_index_arrays, int32_t backend, int32_t num_threads, uintptr_t stream,
                   nb::handle block_mask, int32_t block_q, int32_t block_k, nb::handle bit_mask, nb::handle bias,
                   nb::handle alibi_slopes) {
  fastattn::AttnArgs a = view_args(
      q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, block_mask, block_q, block_k, bit_mask, bias,
      alibi_slopes, scalar_args(max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                  check_index_arrays, backend, num_threads, false));
  a.out = view_to_tensor(out, "out");
  if (!lse.is_none()) a.lse = view_to_tensor(lse, "lse");
  fastattn::Status st;
  {
    nb::gil_scoped_release nogil;
    st = fastattn::forward(a, as_stream(stream));
  }
  fastattn_py::raise_if_error(st);
}

void backward_views(nb::handle dout, nb::handle q, nb::handle k, nb::handle v, nb::handle out,
                    nb::handle lse, nb::handle dq, nb::handle dk, nb::handle dv, nb::handle cu_seqlens_q,
                    nb::handle cu_seqlens_k, nb::handle seqused_q, nb::handle seqused_k,
                    int32_t max_seqlen_q, int32_t max_seqlen_k, float softmax_scale, bool causal,
                    int32_t window_left, int32_t window_right, float softcap, bool check_index_arrays,
                    int32_t backend, int32_t num_threads, bool deterministic, uintptr_t stream,
                    nb::handle block_mask, int32_t block_q, int32_t block_k, nb::handle bit_mask, nb::handle bias,
                    nb::handle dbias, nb::handle alibi_slopes) {
  fastattn::AttnArgs a = view_args(
      q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, block_mask, block_q, block_k, bit_mask, bias,
      alibi_slopes, scalar_args(max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                  check_index_arrays, backend, num_threads, deterministic));
  if (!dbias.is_none()) a.dbias = view_to_tensor(dbias, "dbias");
  a.out = view_to_tensor(out, "out");
  a.lse = view_to_tensor(lse, "lse");
  fastattn::Tensor tdout = view_to_tensor(dout, "dout");
  fastattn::Tensor tdq = view_to_tensor(dq, "dq");
  fastattn::Tensor tdk = view_to_tensor(dk, "dk");
  fastattn::Tensor tdv = view_to_tensor(dv, "dv");
  fastattn::Status st;
  {
    nb::gil_scoped_release nogil;
    st = fastattn::backward(a, tdout, tdq, tdk, tdv, as_stream(stream));
  }
  fastattn_py::raise_if_error(st);
}

// A (batch, pages_per_seq) int32 page table with contiguous rows, on q's device.
fastattn::PageTable to_page_table(const InArray& a, const fastattn::Tensor& q) {
  const nb::dlpack::dtype dt = a.dtype();
  if (dt.code != (uint8_t)nb::dlpack::dtype_code::Int || dt.bits != 32 || dt.lanes != 1 || a.ndim() != 2)
    throw nb::value_error("page_table: expected a 2-D int32 array (batch, pages_per_seq)");
  if (a.shape(1) > 1 && a.stride(1) != 1) throw nb::value_error("page_table: rows must be contiguous");
  if (a.shape(0) > 1 && a.stride(0) != int64_t(a.shape(1)))
    throw nb::value_error("page_table: must be C-contiguous (batch, pages_per_seq)");
  const bool on_cuda = a.device_type() == nb::device::cuda::value;
  if (on_cuda != (q.device == fastattn::Device::CUDA))
    throw nb::value_error("page_table: must live on the same device as q");
  return {fastattn_py::given_int32_data(a.data()), int64_t(a.shape(0)), int64_t(a.shape(1))};
}

// The scalar arguments of one KV-cache call; tensors and index arrays are set by the caller.
fastattn::KvCacheArgs kvcache_scalars(bool rotary_interleaved, float softmax_scale, bool causal,
                                      int32_t window_left, int32_t window_right, float softcap,
                                      int32_t num_splits, bool check_index_arrays, int32_t backend,
                                      int32_t num_threads) {
  auto a = with_common_scalars<fastattn::KvCacheArgs>(softmax_scale, causal, window_left, window_right,
                                                      softcap, check_index_arrays, backend, num_threads);
  a.rotary_interleaved = rotary_interleaved;
  a.num_splits = num_splits;
  return a;
}

void run_kvcache(const fastattn::KvCacheArgs& a, uintptr_t stream) {
  fastattn::Status st;
  {
    nb::gil_scoped_release nogil;
    st = fastattn::forward_kvcache(a, as_stream(stream));
  }
  fastattn_py::raise_if_error(st);
}

// forward_kvcache over DLPack arrays; the caches are written in place.
void forward_kvcache(const InArray& q, const OutArray& k_cache, const OutArray& v_cache,
                     const OptIn& k_new, const OptIn& v_new, const OutArray& out,
                     const std::optional<OutArray>& lse, const OptIn& rotary_cos, const OptIn& rotary_sin,
                     const OptIn& cache_seqlens, const OptIn& cache_batch_idx, const OptIn& cache_leftpad,
                     const OptIn& page_table, bool rotary_interleaved, float softmax_scale, bool causal,
                     int32_t window_left, int32_t window_right, float softcap, int32_t num_splits,
                     bool check_index_arrays, int32_t backend, int32_t num_threads, uintptr_t stream,
                     const OptIn& alibi_slopes) {
  fastattn::KvCacheArgs a = kvcache_scalars(rotary_interleaved, softmax_scale, causal, window_left,
                                            window_right, softcap, num_splits, check_index_arrays,
                                            backend, num_threads);
  a.q = fastattn_py::to_tensor(q, "q");
  a.k_cache = fastattn_py::to_tensor(k_cache, "k_cache");
  a.v_cache = fastattn_py::to_tensor(v_cache, "v_cache");
  if (k_new) a.k_new = fastattn_py::to_tensor(*k_new, "k");
  if (v_new) a.v_new = fastattn_py::to_tensor(*v_new, "v");
  a.out = fastattn_py::to_tensor(out, "out");
  if (lse) a.lse = fastattn_py::to_tensor(*lse, "lse");
  if (rotary_cos) a.rotary_cos = fastattn_py::to_tensor(*rotary_cos, "rotary_cos");
  if (rotary_sin) a.rotary_sin = fastattn_py::to_tensor(*rotary_sin, "rotary_sin");
  if (cache_seqlens) a.cache_seqlens = fastattn_py::to_index(*cache_seqlens, "cache_seqlens", a.q);
  if (cache_batch_idx) a.cache_batch_idx = fastattn_py::to_index(*cache_batch_idx, "cache_batch_idx", a.q);
  if (cache_leftpad) a.cache_leftpad = fastattn_py::to_index(*cache_leftpad, "cache_leftpad", a.q);
  if (page_table) a.page_table = to_page_table(*page_table, a.q);
  if (alibi_slopes) a.alibi_slopes = fastattn_py::to_tensor(*alibi_slopes, "alibi_slopes");
  run_kvcache(a, stream);
}

// forward_kvcache over plain-value views (the torch fast path); optional views may be None.
void forward_kvcache_views(nb::handle q, nb::handle k_cache, nb::handle v_cache, nb::handle k_new,
                           nb::handle v_new, nb::handle out, nb::handle lse, nb::handle rotary_cos,
                           nb::handle rotary_sin, nb::handle cache_seqlens, nb::handle cache_batch_idx,
                           nb::handle cache_leftpad, nb::handle page_table, bool rotary_interleaved,
                           float softmax_scale, bool causal, int32_t window_left, int32_t window_right,
                           float softcap, int32_t num_splits, bool check_index_arrays, int32_t backend,
                           int32_t num_threads, uintptr_t stream, nb::handle alibi_slopes) {
  fastattn::KvCacheArgs a = kvcache_scalars(rotary_interleaved, softmax_scale, causal, window_left,
                                            window_right, softcap, num_splits, check_index_arrays,
                                            backend, num_threads);
  a.q = view_to_tensor(q, "q");
  a.k_cache = view_to_tensor(k_cache, "k_cache");
  a.v_cache = view_to_tensor(v_cache, "v_cache");
  if (!k_new.is_none()) a.k_new = view_to_tensor(k_new, "k");
  if (!v_new.is_none()) a.v_new = view_to_tensor(v_new, "v");
  a.out = view_to_tensor(out, "out");
  if (!lse.is_none()) a.lse = view_to_tensor(lse, "lse");
  if (!rotary_cos.is_none()) a.rotary_cos = view_to_tensor(rotary_cos, "rotary_cos");
  if (!rotary_sin.is_none()) a.rotary_sin = view_to_tensor(rotary_sin, "rotary_sin");
  if (!cache_seqlens.is_none()) a.cache_seqlens = view_to_index(cache_seqlens, "cache_seqlens", a.q);
  if (!cache_batch_idx.is_none()) a.cache_batch_idx = view_to_index(cache_batch_idx, "cache_batch_idx", a.q);
  if (!cache_leftpad.is_none()) a.cache_leftpad = view_to_index(cache_leftpad, "cache_leftpad", a.q);
  if (!page_table.is_none()) a.page_table = fastattn_py::view_to_page_table(page_table, "page_table", a.q);
  if (!alibi_slopes.is_none()) a.alibi_slopes = view_to_tensor(alibi_slopes, "alibi_slopes");
  run_kvcache(a, stream);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "fastattn C++ API over DLPack arrays (outputs are caller-allocated).";

  nb::class_<Options>(m, "Options", "Scalar and index-array arguments of one attention call.")
      .def("__init__", &init_options, "cu_seqlens_q"_a.none() = nb::none(),
           "cu_seqlens_k"_a.none() = nb::none(), "seqused_q"_a.none() = nb::none(),
           "seqused_k"_a.none() = nb::none(), "max_seqlen_q"_a = 0, "max_seqlen_k"_a = 0,
           "softmax_scale"_a = std::numeric_limits<float>::quiet_NaN(), "causal"_a = false, "window_left"_a = -1, "window_right"_a = -1,
           "softcap"_a = 0.0f, "check_index_arrays"_a = true, "backend"_a = 0,
           "num_threads"_a = 0, "deterministic"_a = false, "block_mask"_a.none() = nb::none(),
           "block_q"_a = 128, "block_k"_a = 128, "bit_mask"_a.none() = nb::none(), "bias"_a.none() = nb::none(),
           "alibi_slopes"_a.none() = nb::none());

  m.def("forward", &forward, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(), "options"_a, "stream"_a,
        "Writes out (and lse when given) for softmax(mask(scale*q k^T)) v.");
  m.def("backward", &backward, "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a, "dk"_a,
        "dv"_a, "options"_a, "stream"_a, "dbias"_a.none() = nb::none(),
        "Writes dq, dk, dv (and dbias, fp32 in bias's shape, when given), the gradients of forward.");
  m.def("forward_views", &forward_views, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a.none(),
        "cu_seqlens_q"_a.none(), "cu_seqlens_k"_a.none(), "seqused_q"_a.none(), "seqused_k"_a.none(),
        "max_seqlen_q"_a, "max_seqlen_k"_a, "softmax_scale"_a, "causal"_a, "window_left"_a,
        "window_right"_a, "softcap"_a, "check_index_arrays"_a, "backend"_a, "num_threads"_a, "stream"_a,
        "block_mask"_a.none() = nb::none(), "block_q"_a = 128, "block_k"_a = 128, "bit_mask"_a.none() = nb::none(),
        "bias"_a.none() = nb::none(), "alibi_slopes"_a.none() = nb::none(),
        "forward over views (data_ptr, shape, strides, dtype, device): no DLPack per array (bit_mask: a view of "
        "4-D int32 packed words).");
  m.def("backward_views", &backward_views, "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a,
        "dk"_a, "dv"_a, "cu_seqlens_q"_a.none(), "cu_seqlens_k"_a.none(), "seqused_q"_a.none(),
        "seqused_k"_a.none(), "max_seqlen_q"_a, "max_seqlen_k"_a, "softmax_scale"_a, "causal"_a,
        "window_left"_a, "window_right"_a, "softcap"_a, "check_index_arrays"_a, "backend"_a,
        "num_threads"_a, "deterministic"_a, "stream"_a, "block_mask"_a.none() = nb::none(), "block_q"_a = 128,
        "block_k"_a = 128, "bit_mask"_a.none() = nb::none(), "bias"_a.none() = nb::none(),
        "dbias"_a.none() = nb::none(), "alibi_slopes"_a.none() = nb::none(),
        "backward over views, as forward_views (block_mask: a view of a 4-D byte array; bit_mask: of 4-D int32 "
        "packed words).");
  m.def("forward_kvcache", &forward_kvcache, "q"_a, "k_cache"_a, "v_cache"_a, "k_new"_a.none(),
        "v_new"_a.none(), "out"_a, "lse"_a.none(), "rotary_cos"_a.none(), "rotary_sin"_a.none(),
        "cache_seqlens"_a.none(), "cache_batch_idx"_a.none(), "cache_leftpad"_a.none(),
        "page_table"_a.none(), "rotary_interleaved"_a, "softmax_scale"_a, "causal"_a, "window_left"_a,
        "window_right"_a, "softcap"_a, "num_splits"_a, "check_index_arrays"_a, "backend"_a,
        "num_threads"_a, "stream"_a, "alibi_slopes"_a.none() = nb::none(),
        "Appends k_new/v_new into the caches (in place), then writes out (and lse) of q against them "
        "(alibi_slopes: fp32 (heads_q) or (batch, heads_q), FlashAttention's ALiBi over the cache's keys).");
  m.def("forward_kvcache_views", &forward_kvcache_views, "q"_a, "k_cache"_a, "v_cache"_a, "k_new"_a.none(),
        "v_new"_a.none(), "out"_a, "lse"_a.none(), "rotary_cos"_a.none(), "rotary_sin"_a.none(),
        "cache_seqlens"_a.none(), "cache_batch_idx"_a.none(), "cache_leftpad"_a.none(),
        "page_table"_a.none(), "rotary_interleaved"_a, "softmax_scale"_a, "causal"_a, "window_left"_a,
        "window_right"_a, "softcap"_a, "num_splits"_a, "check_index_arrays"_a, "backend"_a,
        "num_threads"_a, "stream"_a, "alibi_slopes"_a.none() = nb::none(),
        "forward_kvcache over views, as forward_views.");
  m.def("cuda_available", &fastattn::cuda_available, "CUDA kernels compiled in and a device present.");
  m.def("version", &fastattn::version);
  m.def("build_info", &fastattn::build_info, "Archs, dtypes, head dims and kernel count of this build.");
}
