// Host data movement of forward_kvcache (see cpu_kvcache.h); the attention itself is the CPU or
// reference forward on the gathered view.
#include "cpu/cpu_kvcache.h"

#include <cstring>

#include "util/half.h"

namespace fastattn::cpu {
namespace {

// Address of (i0, i1, i2, 0) of a 4-D tensor.
char* row_of(const Tensor& t, int64_t i0, int64_t i1, int64_t i2) {
  const int64_t off = i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
  return static_cast<char*>(t.data) + off * dtype_size(t.dtype);
}

const char* cos_row(const Tensor& t, int64_t pos) {
  return static_cast<const char*>(t.data) + pos * t.stride[0] * dtype_size(t.dtype);
}

// dst = src with its first `rot` columns rotated by the angles of `pos` (fp32 math, rounded to
// the dtype; the other columns copied). Pairs: (2j, 2j + 1) interleaved, (j, j + rot / 2) not.
void rotate_row(const KvCacheArgs& a, int64_t pos, int rot, int d, const char* src, char* dst) {
  const DType dt = a.q.dtype;
  const int es = dtype_size(dt);
  const char* c = cos_row(a.rotary_cos, pos);
  const char* s = cos_row(a.rotary_sin, pos);
  const int half = rot / 2;
  // Read everything first: src and dst may be one row.
  float x[1024];
  for (int j = 0; j < rot; ++j) x[j] = util::load_as_float(src + j * es, dt);
  for (int j = 0; j < half; ++j) {
    const float cj = util::load_as_float(c + j * es, dt), sj = util::load_as_float(s + j * es, dt);
    const int i0 = a.rotary_interleaved ? 2 * j : j;
    const int i1 = a.rotary_interleaved ? 2 * j + 1 : j + half;
    const float x0 = x[i0], x1 = x[i1];
    util::store_from_float(dst + i0 * es, dt, x0 * cj - x1 * sj);
    util::store_from_float(dst + i1 * es, dt, x0 * sj + x1 * cj);
  }
  if (dst != src) std::memcpy(dst + rot * es, src + rot * es, size_t(d - rot) * es);
}

}  // namespace

void kvcache_append(const detail::KvCachePlan& p, const KvCacheArgs& a) {
  const int es = dtype_size(a.q.dtype);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t i = 0; i < p.seqlen_new; ++i) {
      const int64_t pos = p.cached(b) + i;
      const detail::KvCachePlan::Slot at = p.slot(b, pos);
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        const char* k = row_of(a.k_new, b, i, h);
        char* kc = row_of(a.k_cache, at.row, at.pos, h);
        if (p.rotary_dim > 0) {
          rotate_row(a, pos, p.rotary_dim, p.head_dim, k, kc);
        } else {
          std::memcpy(kc, k, size_t(p.head_dim) * es);
        }
        std::memcpy(row_of(a.v_cache, at.row, at.pos, h), row_of(a.v_new, b, i, h), size_t(p.head_dim_v) * es);
      }
    }
  }
}

void kvcache_rotate_q(const detail::KvCachePlan& p, const KvCacheArgs& a, void* dst) {
  const int64_t row_bytes = int64_t(p.head_dim) * dtype_size(a.q.dtype);
  char* out = static_cast<char*>(dst);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const int64_t pos = p.cached(b) + (p.q_rows_advance ? i : 0);
      for (int64_t h = 0; h < p.heads_q; ++h) {
        char* o = out + ((b * p.seqlen_q + i) * p.heads_q + h) * row_bytes;
        rotate_row(a, pos, p.rotary_dim, p.head_dim, row_of(a.q, b, i, h), o);
      }
    }
  }
}

void kvcache_gather(const detail::KvCachePlan& p, const KvCacheArgs& a, int64_t max_keys, void* k_dst,
                    void* v_dst) {
  const int es = dtype_size(a.q.dtype);
  const int64_t k_row = int64_t(p.head_dim) * es, v_row = int64_t(p.head_dim_v) * es;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t first = p.first_key(b);
    for (int64_t j = 0; j < p.keys(b); ++j) {
      const detail::KvCachePlan::Slot at = p.slot(b, first + j);
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        const int64_t dst_row = (b * max_keys + j) * p.heads_kv + h;
        std::memcpy(static_cast<char*>(k_dst) + dst_row * k_row, row_of(a.k_cache, at.row, at.pos, h), size_t(k_row));
        std::memcpy(static_cast<char*>(v_dst) + dst_row * v_row, row_of(a.v_cache, at.row, at.pos, h), size_t(v_row));
      }
    }
  }
}

}  // namespace fastattn::cpu
