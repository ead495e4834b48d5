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

// A lane's columns lane + 32 j (j < kLaneCols) of a row, read before any store: a load-store loop
// over the columns waits one memory latency per 32 columns (a store's row may alias the next
// load's, so the loads cannot move ahead), and the reads do not depend on the cache length or
// page, so their latency overlaps those lookups. Rows up to 256 columns; wider ones take the loop.
constexpr int kLaneCols = 8;

template <typename T>
struct LaneCols {
  T v[kLaneCols];
  __device__ void read(const T* src, int cols, int lane) {
#pragma unroll
    for (int j = 0; j < kLaneCols; ++j) v[j] = lane + 32 * j < cols ? src[lane + 32 * j] : T();
  }
  __device__ void write(T* dst, int cols, int lane) const {
#pragma unroll
    for (int j = 0; j < kLaneCols; ++j)
      if (lane + 32 * j < cols) dst[lane + 32 * j] = v[j];
  }
};

// A lane's share of a row to rotate, the same way: its pairs (j = lane + 32 jj < rotary_dim / 2, as
// rotate_row pairs them) and its columns past rotary_dim, read first; at the store, the position's
// cos / sin (which wait for the cache length) all read before the first store. Rows up to 256.
template <typename T>
struct LaneRotaryRow {
  static constexpr int kPairs = kLaneCols / 2;
  T x0[kPairs], x1[kPairs];
  LaneCols<T> rest;
  __device__ void read(const KvAppendParams& p, const T* src, int d, int lane) {
    const int half = p.rotary_dim / 2;
#pragma unroll
    for (int jj = 0; jj < kPairs; ++jj) {
      const int j = lane + 32 * jj;
      x0[jj] = j < half ? src[p.interleaved ? 2 * j : j] : T();
      x1[jj] = j < half ? src[p.interleaved ? 2 * j + 1 : j + half] : T();
    }
    rest.read(src + p.rotary_dim, d - p.rotary_dim, lane);
  }
  __device__ void write(const KvAppendParams& p, int64_t pos, T* dst, int d, int lane) const {
    const int half = p.rotary_dim / 2;
    const T* c = row_ptr<T>(p.cos, pos, 0, 0);
    const T* s = row_ptr<T>(p.sin, pos, 0, 0);
    float cj[kPairs], sj[kPairs];
#pragma unroll
    for (int jj = 0; jj < kPairs; ++jj) {
      const int j = lane + 32 * jj;
      cj[jj] = j < half ? to_f32(c[j]) : 0.f;
      sj[jj] = j < half ? to_f32(s[j]) : 0.f;
    }
#pragma unroll
    for (int jj = 0; jj < kPairs; ++jj) {
      const int j = lane + 32 * jj;
      if (j >= half) continue;
      const float a = to_f32(x0[jj]), b = to_f32(x1[jj]);
      dst[p.interleaved ? 2 * j : j] = from_f32<T>(a * cj[jj] - b * sj[jj]);
      dst[p.interleaved ? 2 * j + 1 : j + half] = from_f32<T>(a * sj[jj] + b * cj[jj]);
    }
    rest.write(dst + p.rotary_dim, d - p.rotary_dim, lane);
  }
};

// Row (b, i, h) of k_new / v_new -> its cache slot at position cached + i.
template <typename T>
__device__ void append_row(const KvAppendParams& p, int64_t r, int lane) {
  const auto [b, i, h] = row_coord(r, p.seqlen_new, p.heads_kv);
  const T* k = row_ptr<T>(p.k_new, b, i, h);
  const T* v = row_ptr<T>(p.v_new, b, i, h);
  const bool k_in_regs = p.head_dim <= 32 * kLaneCols;
  const bool v_in_regs = p.head_dim_v <= 32 * kLaneCols;
  LaneRotaryRow<T> kr;  // rotary_dim 0: every column in `rest`
  LaneCols<T> vr;
  if (k_in_regs) kr.read(p, k, p.head_dim, lane);
  if (v_in_regs) vr.read(v, p.head_dim_v, lane);
  const int64_t pos = int64_t(cached_tokens(p, b)) + i;
  int64_t row = p.batch_idx ? p.batch_idx[b] : b, at = pos;
  if (p.page_table) {
    row = p.page_table[int64_t(b) * p.pages_per_seq + pos / p.page_size];
    at = pos % p.page_size;
  }
  T* kc = row_ptr<T>(p.k_cache, row, at, h);
  T* vc = row_ptr<T>(p.v_cache, row, at, h);
  if (k_in_regs)
    kr.write(p, pos, kc, p.head_dim, lane);
  else
    rotate_row<T>(p, pos, k, kc, p.head_dim, lane);
  if (v_in_regs) {
    vr.write(vc, p.head_dim_v, lane);
  } else {
    for (int j = lane; j < p.head_dim_v; j += 32) vc[j] = v[j];
  }
}

// Row (b, i, h) of q -> the contiguous rotated copy.
template <typename T>
__device__ void rotate_q_row(const KvAppendParams& p, int64_t r, int lane) {
  const auto [b, i, h] = row_coord(r, p.seqlen_q, p.heads_q);
  const T* q = row_ptr<T>(p.q, b, i, h);
  T* qr = static_cast<T*>(p.q_rotated) + r * p.head_dim;
  const bool in_regs = p.head_dim <= 32 * kLaneCols;
  LaneRotaryRow<T> x;
  if (in_regs) x.read(p, q, p.head_dim, lane);
  const int64_t pos = int64_t(cached_tokens(p, b)) + (p.q_rows_advance ? i : 0);
  if (in_regs)
    x.write(p, pos, qr, p.head_dim, lane);
  else
    rotate_row<T>(p, pos, q, qr, p.head_dim, lane);
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
