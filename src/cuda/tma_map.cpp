#include "cuda/tma_map.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>

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

Status make_tma_map(const Tensor& t, int box_rows, CUtensorMap* out, int box_heads) {
  EncodeFn encode = encode_fn();
  if (encode == nullptr) return {Code::CudaError, "cuTensorMapEncodeTiled is not available from the driver"};
  const bool varlen = t.ndim == 3;
  const int esz = dtype_size(t.dtype);
  // Innermost first: dim, seq, heads, batch. A varlen tensor is a batch of one.
  const int64_t d = t.shape[t.ndim - 1], h = t.shape[t.ndim - 2], s = t.shape[t.ndim - 3];
  const int64_t b = varlen ? 1 : t.shape[0];
  const int64_t st_s = t.stride[t.ndim - 3], st_h = t.stride[t.ndim - 2];
  const int64_t st_b = varlen ? st_s * (s > 0 ? s : 1) : t.stride[0];
  // A size-0 dim cannot be encoded; such a tensor is never read, so any extent of 1 will do.
  cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(s > 0 ? s : 1), cuuint64_t(h > 0 ? h : 1),
                        cuuint64_t(b > 0 ? b : 1)};
  auto stride_bytes = [&](int64_t st) { return cuuint64_t((st > 0 ? st : 1) * esz); };
  cuuint64_t strides[3] = {stride_bytes(st_s), stride_bytes(st_h), stride_bytes(st_b)};
  for (auto& st : strides) st = (st + 15) / 16 * 16;  // only size-1 dims can be unaligned here
  cuuint32_t box[4] = {64, cuuint32_t(box_rows), cuuint32_t(box_heads), 1};
  cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType dt =
      t.dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUresult r = encode(out, dt, 4, t.data, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {Code::CudaError, "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")"};
  return Status::Ok();
}

bool tma_storable(const Tensor& t) {
  if (t.ndim != 4 || t.stride[3] != 1 || reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  const int esz = dtype_size(t.dtype);
  for (int i = 0; i < 3; ++i)
    if (t.shape[i] > 1 && (t.stride[i] * esz) % 16 != 0) return false;
  return true;
}

}  // namespace fastattn::cuda_backend
