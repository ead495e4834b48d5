// The KV-cache append and rotary embedding (see kvcache_append.h), one launch per call. One warp
// per head row: lanes walk the rotated pairs, then copy the columns past rotary_dim. Rotation in
// fp32, rounded to the dtype, like the host path (src/cpu/cpu_kvcache.cpp) and FlashAttention.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/common/element.cuh"
#include "cuda/kvcache_append.h"

namespace fastattn::cuda_backend {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T>
__device__ inline T* row_ptr(const RowView& v, int64_t i0, int64_t i1, int64_t i2) {
  return static_cast<T*>(v.data) + i0 * v.stride0 + i1 * v.stride1 + i2 * v.stride2;
}

// Row r of a (b, i, h) walk over `seqlen` tokens and `heads` heads.
struct RowCoord {
  int b, i, h;
};
__device__ inline RowCoord row_coord(int64_t r, int seqlen, int heads) {
  return {int(r / (int64_t(heads) * seqlen)), int(r / heads % seqlen), int(r % heads)};
}

__device__ inline int cached_tokens(const KvAppendParams& p, int b) {
  return p.seqlens ? p.seqlens[b] : p.capacity;
}

// One warp: dst = src rotated at `pos` over the first rotary_dim columns (or copied when
// rotary_dim is 0), columns [rotary_dim, d) copied. All reads of a pair precede its writes.
template <typename T>
__device__ void rotate_row(const KvAppendParams& p, int64_t pos, const T* src, T* dst, int d, int lane) {
  const int half = p.rotary_dim / 2;
  if (half > 0) {
    const T* c = row_ptr<T>(p.cos, pos, 0, 0);
    const T* s = row_ptr<T>(p.sin, pos, 0, 0);
    for (int j = lane; j < half; j += 32) {
      const int i0 = p.interleaved ? 2 * j : j;
      const int i1 = p.interleaved ? 2 * j + 1 : j + half;
      const float x0 = to_f32(src[i0]), x1 = to_f32(src[i1]);
      const float cj = to_f32(c[j]), sj = to_f32(s[j]);
      dst[i0] = from_f32<T>(x0 * cj - x1 * sj);
      dst[i1] = from_f32<T>(x0 * sj + x1 * cj);
    }
  }
  for (int j = p.rotary_dim + lane; j < d; j += 32) dst[j] = src[j];
}

// Row (b, i, h) of k_new / v_new -> its cache slot at position cached + i.
template <typename T>
__device__ void append_row(const KvAppendParams& p, int64_t r, int lane) {
  const auto [b, i, h] = row_coord(r, p.seqlen_new, p.heads_kv);
  const int64_t pos = int64_t(cached_tokens(p, b)) + i;
  int64_t row = p.batch_idx ? p.batch_idx[b] : b, at = pos;
  if (p.page_table) {
    row = p.page_table[int64_t(b) * p.pages_per_seq + pos / p.page_size];
    at = pos % p.page_size;
  }
  rotate_row<T>(p, pos, row_ptr<T>(p.k_new, b, i, h), row_ptr<T>(p.k_cache, row, at, h), p.head_dim, lane);
  const T* v = row_ptr<T>(p.v_new, b, i, h);
  T* vc = row_ptr<T>(p.v_cache, row, at, h);
  for (int j = lane; j < p.head_dim_v; j += 32) vc[j] = v[j];
}

// Row (b, i, h) of q -> the contiguous rotated copy.
template <typename T>
__device__ void rotate_q_row(const KvAppendParams& p, int64_t r, int lane) {
  const auto [b, i, h] = row_coord(r, p.seqlen_q, p.heads_q);
  const int64_t pos = int64_t(cached_tokens(p, b)) + (p.q_rows_advance ? i : 0);
  rotate_row<T>(p, pos, row_ptr<T>(p.q, b, i, h), static_cast<T*>(p.q_rotated) + r * p.head_dim, p.head_dim, lane);
}

// The three jobs of one call in one launch (a decode step's host cost is mostly launches): warp
// rows [0, n_new) append, [n_new, n_new + n_q) rotate q, the rest count keys, 32 sequences each.
struct Jobs {
  int64_t append, rotate, count;
  __host__ __device__ int64_t total() const { return append + rotate + count; }
};

Jobs jobs_of(const KvAppendParams& p) {
  return {int64_t(p.batch) * p.seqlen_new * p.heads_kv,
          p.rotary_dim > 0 ? int64_t(p.batch) * p.seqlen_q * p.heads_q : 0,
          p.keys ? (int64_t(p.batch) + 31) / 32 : 0};
}

template <typename T>
__global__ void prepare_cache(KvAppendParams p, Jobs jobs) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < jobs.total();
       r += int64_t(gridDim.x) * kWarpsPerBlock) {
    if (r < jobs.append) {
      append_row<T>(p, r, lane);
    } else if (r < jobs.append + jobs.rotate) {
      rotate_q_row<T>(p, r - jobs.append, lane);
    } else {
      const int64_t b = (r - jobs.append - jobs.rotate) * 32 + lane;
      if (b < p.batch) p.keys[b] = cached_tokens(p, int(b)) + p.seqlen_new - (p.leftpad ? p.leftpad[b] : 0);
    }
  }
}

template <typename T>
void launch(const KvAppendParams& p, cudaStream_t s) {
  const Jobs jobs = jobs_of(p);
  if (jobs.total() == 0) return;
  const int64_t blocks = std::min<int64_t>((jobs.total() + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535);
  prepare_cache<T><<<unsigned(blocks), kWarpsPerBlock * 32, 0, s>>>(p, jobs);
}

}  // namespace

Status kvcache_append(const KvAppendParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::F16: launch<__half>(p, s); break;
    case DType::BF16: launch<__nv_bfloat16>(p, s); break;
    case DType::F32: launch<float>(p, s); break;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return {Code::CudaError, std::string("kvcache append: launch failed: ") + cudaGetErrorString(err)};
  }
  return Status::Ok();
}

}  // namespace fastattn::cuda_backend
