// The KV-cache step before attention on the GPU: new keys (rotated) and values written into the
// cache, q rotated into a workspace copy, and each sequence's key count. Host-only header.
#pragma once

#include <cstdint>

#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// A 4-D (or 2-D for cos/sin) strided view; strides in elements, the last dim contiguous.
struct RowView {
  void* data = nullptr;
  int64_t stride0 = 0, stride1 = 0, stride2 = 0;
};

struct KvAppendParams {
  DType dtype = DType::BF16;
  int batch = 0, seqlen_q = 0, heads_q = 0, heads_kv = 0, head_dim = 0, head_dim_v = 0;
  int seqlen_new = 0;
  int capacity = 0;                // positions per sequence: used when seqlens is null
  RowView k_cache, v_cache;        // (row, position, head) -> row; paged: row = page
  const int32_t* page_table = nullptr;  // (batch, pages_per_seq) when paged
  int pages_per_seq = 0, page_size = 0;
  const int32_t* batch_idx = nullptr;   // cache row of each sequence (null: b)
  const int32_t* seqlens = nullptr;     // tokens cached per sequence (null: capacity)
  const int32_t* leftpad = nullptr;     // first used position (null: 0)
  RowView k_new, v_new;                 // (b, i, head) -> row
  RowView cos, sin;                     // (position) -> row of rotary_dim / 2
  int rotary_dim = 0;                   // 0: no rotary
  bool interleaved = true;
  bool q_rows_advance = false;          // causal/local: q row i at position n + i, else n
  RowView q;                            // read when rotary is on
  void* q_rotated = nullptr;            // contiguous (b, s_q, h_q, d) output when rotary is on
  int32_t* keys = nullptr;              // out: keys per sequence, n + s_new - leftpad
};

// Launches the append (k_new rotated, v_new), q's rotation and the key counts on `stream`, in one
// kernel.
Status kvcache_append(const KvAppendParams& p, void* stream);

}  // namespace fastattn::cuda_backend
