#include "cuda/tma_map.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "cuda/env_switch.h"

namespace fastattn::cuda_backend {
namespace {

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                              CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                              CUtensorMapFloatOOBfill);

// The driver entry point is fetched through the runtime, so we need not link libcuda.
EncodeFn encode_fn() {
  static EncodeFn fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<EncodeFn>(p);
  });
  return fn;
}

}  // namespace

TmaTensor tma_tensor(const detail::Problem& p, Role role) {
  return tma_tensor(p, role, role == Role::Q ? p.q : role == Role::K ? p.k : role == Role::V ? p.v : p.out);
}

TmaTensor tma_tensor(const detail::Problem& p, Role role, const detail::Operand& o) {
  const bool keys = role == Role::K || role == Role::V;
  TmaTensor t;
  t.data = o.data;
  t.dtype = o.dtype;
  t.varlen = p.varlen;
  t.batch = p.varlen ? 1 : p.batch;
  t.rows = p.varlen ? (keys ? p.total_k : p.total_q) : (keys ? p.max_rows_k : p.max_rows_q);
  t.heads = keys ? p.heads_kv : p.heads_q;
  t.dim = role == Role::V || role == Role::Out ? p.head_dim_v : p.head_dim;
  t.stride_s = o.token_stride;
  t.stride_h = o.head_stride;
  t.stride_b = p.varlen ? o.token_stride * (t.rows > 0 ? t.rows : 1) : o.batch_stride;
  if (keys && p.cache.defined()) {  // the KV cache itself: (rows or pages, positions, h_kv, d)
    t.batch = p.cache.rows;
    t.rows = p.cache.positions;
  }
  return t;
}

TmaTensor tma_tensor(const Tensor& t) {
  TmaTensor m;
  m.data = t.data;
  m.dtype = t.dtype;
  m.varlen = t.ndim == 3;
  m.batch = m.varlen ? 1 : t.shape[0];
  m.rows = t.shape[t.ndim - 3];
  m.heads = t.shape[t.ndim - 2];
  m.dim = t.shape[t.ndim - 1];
  m.stride_s = t.stride[t.ndim - 3];
  m.stride_h = t.stride[t.ndim - 2];
  m.stride_b = m.varlen ? m.stride_s * (m.rows > 0 ? m.rows : 1) : t.stride[0];
  return m;
}

namespace {

// Encodes `rank` dims (innermost first; strides of dims 1.. in bytes) with the 128-byte swizzle.
Status encode_tiled(const TmaTensor& t, int rank, const cuuint64_t* dims, cuuint64_t* strides,
                    const cuuint32_t* box, CUtensorMap* out) {
  EncodeFn encode = encode_fn();
  if (encode == nullptr) return {Code::CudaError, "cuTensorMapEncodeTiled is not available from the driver"};
  for (int i = 0; i < rank - 1; ++i) strides[i] = (strides[i] + 15) / 16 * 16;  // only size-1 dims can be unaligned here
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType dt =
      t.dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  // No L2 promotion: with 256-byte promotion the boxes' 128-byte rows drew 25 % more L2 sector reads
  // than the bytes they load (ncu, H200 decode b64 4k: 42.1 M against 33.7 M sectors, 8.5 M of them
  // L2 hits), and the L2, not HBM, capped the stream: decode b64 32k 2040 -> 1851 us, b8 32k 265 ->
  // 236 us; prefill forward and backward level (docs/notes/inference.md, session 45).
  // FASTATTN_TMA_L2_256=1: the 256-byte promotion, for A/B measurement.
  const CUtensorMapL2promotion promotion = env_switch("FASTATTN_TMA_L2_256", false)
                                               ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                               : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  CUresult r = encode(out, dt, cuuint32_t(rank), t.data, dims, strides, box, elem_strides,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {Code::CudaError, "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")"};
  return Status::Ok();
}

// A size-0 dim cannot be encoded; such a tensor is never read, so any extent of 1 will do.
cuuint64_t extent(int64_t n) { return cuuint64_t(n > 0 ? n : 1); }

// A stride in elements as bytes (a size-1 dim's stride may be 0: any value serves).
cuuint64_t stride_bytes(const TmaTensor& t, int64_t stride) {
  return cuuint64_t((stride > 0 ? stride : 1) * dtype_size(t.dtype));
}

}  // namespace

Status make_tma_map(const TmaTensor& t, int box_rows, CUtensorMap* out, int box_heads) {
  // Innermost first: dim, seq, heads, batch.
  const cuuint64_t dims[4] = {extent(t.dim), extent(t.rows), extent(t.heads), extent(t.batch)};
  cuuint64_t strides[3] = {stride_bytes(t, t.stride_s), stride_bytes(t, t.stride_h), stride_bytes(t, t.stride_b)};
  const cuuint32_t box[4] = {64, cuuint32_t(box_rows), cuuint32_t(box_heads), 1};
  return encode_tiled(t, 4, dims, strides, box, out);
}

Status make_tma_map_by_atom(const TmaTensor& t, int box_rows, CUtensorMap* out) {
  if (t.dim % 64 != 0) return Status::Unsupported("internal: an atom-spanning TMA box needs dim % 64 == 0");
  // Innermost first: 64 columns, seq, atom (128 bytes apart), heads, batch.
  const cuuint64_t dims[5] = {64, extent(t.rows), cuuint64_t(t.dim / 64), extent(t.heads), extent(t.batch)};
  cuuint64_t strides[4] = {stride_bytes(t, t.stride_s), stride_bytes(t, 64), stride_bytes(t, t.stride_h),
                           stride_bytes(t, t.stride_b)};
  const cuuint32_t box[5] = {64, cuuint32_t(box_rows), cuuint32_t(t.dim / 64), 1, 1};
  return encode_tiled(t, 5, dims, strides, box, out);
}

bool aligned16(const TmaTensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  if (t.rows == 0 || t.heads == 0 || t.dim == 0 || (!t.varlen && t.batch == 0)) return true;  // nothing is read
  const int esz = dtype_size(t.dtype);
  // stride_bytes encodes a size-1 dim's stride, the only one that may be 0 or negative.
  auto ok = [&](int64_t extent, int64_t stride) { return tma_stride_ok(extent, stride, esz); };
  return ok(t.varlen ? 1 : t.batch, t.stride_b) && ok(t.rows, t.stride_s) && ok(t.heads, t.stride_h);
}

bool tma_storable(const TmaTensor& t) { return !t.varlen && aligned16(t); }

}  // namespace fastattn::cuda_backend
