// The resolved description of one attention call, shared by every backend (CPU, reference,
// CUDA). Validation produces it; backends never re-derive shapes, offsets, scale or windows.
#pragma once

#include <cstdint>
#include <vector>

#include "fastattn/types.h"

namespace fastattn::detail {

// Where an operand's elements live. Element (sequence b, token t of the packed/batched token
// axis, head h, column x) is at element offset
//   b * batch_stride + t * token_stride + h * head_stride + x.
// Fixed-length layout: batch_stride = stride[0] and t counts from 0 in every sequence.
// Varlen layout: batch_stride = 0 and t is the packed token index (Sequence::q_start + row).
// lse uses the same scheme with token_stride = 1 (its layout is (b, h, s) or (h, total)).
struct Operand {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t batch_stride = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;

  bool defined() const { return data != nullptr; }
  int64_t offset(int64_t b, int64_t t, int64_t h) const {
    return b * batch_stride + t * token_stride + h * head_stride;
  }
  char* row(int64_t b, int64_t t, int64_t h) const {
    return static_cast<char*>(data) + offset(b, t, h) * dtype_size(dtype);
  }
};

// One sequence of the batch.
struct Sequence {
  int64_t q_start = 0;  // first packed token (varlen) or 0 (fixed length)
  int64_t k_start = 0;
  int32_t rows_q = 0;   // tokens present in the tensors for this sequence
  int32_t rows_k = 0;
  int32_t len_q = 0;    // tokens used (seqused caps rows): the lengths the masks see
  int32_t len_k = 0;
};

// Scalar part of a call: what a kernel needs besides pointers and index arrays.
struct ProblemShape {
  int32_t batch = 0;
  int32_t heads_q = 0;
  int32_t heads_kv = 0;
  int32_t group = 1;          // heads_q / heads_kv (GQA ratio)
  int32_t head_dim = 0;       // d
  int32_t head_dim_v = 0;     // d_v
  bool varlen = false;
  int64_t total_q = 0;        // varlen: packed q tokens; fixed: batch * seqlen_q
  int64_t total_k = 0;
  int32_t max_rows_q = 0;     // largest rows_q / rows_k over sequences (fixed: seqlen)
  int32_t max_rows_k = 0;
  float scale = 0.0f;         // resolved: NaN in the args became 1/sqrt(d)
  float softcap = 0.0f;       // 0 = off
  int32_t window_left = -1;   // -1 = unbounded
  int32_t window_right = -1;  // causal is folded in here as window_right = 0
  DType dtype = DType::F32;   // of q, k, v, out (and dout, dq, dk, dv in backward)
};

// The args' index arrays where they live (device memory on the CUDA backend), null when absent.
struct SeqArrays {
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  const int32_t* used_q = nullptr;
  const int32_t* used_k = nullptr;
};

// forward_kvcache on the CUDA backend: k and v read in place from a cache whose sequence b is not
// simply row b from position 0. The Problem's k/v operands then describe the cache itself (their
// batch_stride steps one cache row or page) and this says where sequence b's key j lives:
//   contiguous: row batch_idx[b] (or b), position leftpad[b] (or 0) + j;
//   paged:      page page_table[b * pages_per_seq + j / page_size], position j % page_size.
// Undefined (rows 0) for every other call: sequence b is row b of k/v.
struct CacheLayout {
  const int32_t* batch_idx = nullptr;   // device arrays, null when absent
  const int32_t* leftpad = nullptr;
  const int32_t* page_table = nullptr;
  int32_t pages_per_seq = 0;
  int32_t page_size = 0;                // 0: contiguous cache
  int64_t rows = 0;                     // k/v dim 0: cache rows or pages
  int64_t positions = 0;                // k/v dim 1: positions per row, or page_size
  bool defined() const { return rows > 0; }
};

// A validated block-sparse mask (fastattn::BlockMask), resolved: entry (b, h, qb, kb) of batch b and
// query head h is at data + b * batch_stride + (h / head_div) * head_stride + qb * row_stride +
// kb * col_stride (batch_stride 0 when dim 0 is shared). Undefined (data null) without one.
struct BlockMaskView {
  const uint8_t* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0, col_stride = 0;
  int32_t head_div = 1;          // heads_q / mask heads: q heads that share a mask head
  int32_t q_blocks = 0, k_blocks = 0;  // dims 2 and 3 as given (cover every sequence)
  int32_t block_q = 0, block_k = 0;
  bool defined() const { return data != nullptr; }
  const uint8_t* at(int64_t b, int64_t h, int64_t qb, int64_t kb) const {
    return data + b * batch_stride + (h / head_div) * head_stride + qb * row_stride + kb * col_stride;
  }
  bool keeps(int64_t b, int64_t h, int64_t i, int64_t j) const { return *at(b, h, i / block_q, j / block_k) != 0; }
};

// A validated element bitmask (MaskKind::DenseBitmask, fastattn::BitMask): strides in words, a
// broadcast dim's stride 0, and how many mask rows / words cover the sequences.
struct BitMaskView {
  const uint32_t* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  int32_t head_div = 1;  // heads_q / mask heads
  int32_t rows = 0, words = 0;  // dims 2 and 3 as given
  bool defined() const { return data != nullptr; }
  const uint32_t* row(int64_t b, int64_t h, int64_t i) const {
    return data + b * batch_stride + (h / head_div) * head_stride + i * row_stride;
  }
  bool keeps(int64_t b, int64_t h, int64_t i, int64_t j) const { return (row(b, h, i)[j / 32] >> (j % 32)) & 1u; }
};

// A validated additive bias (AttnArgs::bias) or its gradient (AttnArgs::dbias): element (b, h, i, j)
// of batch b and query head h at data + (b * batch_stride + (h / head_div) * head_stride +
// i * row_stride + j) elements (batch_stride / head_stride 0 when that dim is shared, or broadcast
// by a stride 0). Undefined (data null) without one.
struct BiasView {
  void* data = nullptr;
  DType dtype = DType::F32;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  int32_t head_div = 1;        // heads_q / bias heads: q heads that share a bias head
  int32_t batch = 1, heads = 1;  // dims 0 and 1 as given
  int32_t rows = 0, cols = 0;  // dims 2 and 3 as given (cover every sequence)
  bool defined() const { return data != nullptr; }
  // Row i of (batch b, query head h): `cols` contiguous elements of `dtype`.
  char* row(int64_t b, int64_t h, int64_t i) const {
    return static_cast<char*>(data) +
           (b * batch_stride + (h / head_div) * head_stride + i * row_stride) * dtype_size(dtype);
  }
};

// Validated ALiBi slopes (AttnArgs::alibi_slopes): the slope of (batch b, query head h) at
// data[b * batch_stride + h] (batch_stride 0 for one slope a head). Undefined (data null) without them.
struct AlibiView {
  const float* data = nullptr;
  int64_t batch_stride = 0;
  bool defined() const { return data != nullptr; }
  float slope(int64_t b, int64_t h) const { return data[b * batch_stride + h]; }
};

struct Problem : ProblemShape {
  Operand q, k, v, out, lse;      // lse.data is null when the forward does not write it
  CacheLayout cache;              // forward_kvcache's cache addressing (CUDA), else undefined
  BlockMaskView blocks;           // MaskKind::BlockSparse, else undefined
  BitMaskView bits;               // MaskKind::DenseBitmask, else undefined
  BiasView bias;                  // AttnArgs::bias, else undefined
  AlibiView alibi;                // AttnArgs::alibi_slopes, else undefined
  SeqArrays seq_arrays;
  std::vector<Sequence> seqs;     // batch entries, from host-readable index arrays (empty when unread)
  int32_t num_threads = 0;        // CPU backend: 0 = all hardware threads
  int32_t num_splits = 1;         // key splits, resolved (>= 1); the reference ignores it
  int32_t num_splits_arg = 0;     // as given (0 = chosen per problem): the CUDA backend's heuristic
  bool kvcache_call = false;      // a forward_kvcache call (the sm80 path splits only those: sm80/fwd/launch.cuh)
  // A score term beside the mask (a stored bias or ALiBi): the CUDA backend runs its bias kernels.
  bool biased() const { return bias.defined() || alibi.defined(); }
};

// Backward's extra operands.
struct GradOperands {
  Operand dout, dq, dk, dv;
  BiasView dbias;  // AttnArgs::dbias (F32), else undefined
};

// False when the call has nothing to compute: no query rows or heads, no keys at all, or a varlen
// bound of 0 on either side (every sequence empty). Such a call writes out = 0 and lse = -inf
// (where there are rows) and launches no attention kernel.
bool has_work(const ProblemShape& s);

// The one place causal is folded into the window: causal is the local window (left, 0).
inline int32_t fold_causal(bool causal, int32_t window_right) { return causal ? 0 : window_right; }

// Scalars only: needs no index array contents (usable by the CUDA path under CUDA graphs).
// Assumes args passed validation.
ProblemShape resolve_shape(const AttnArgs& args);

// Shape, operands and index-array pointers, without reading the index arrays (seqs stays empty):
// what a backend that reads them on its device (CUDA) needs. Assumes args passed validation.
Problem resolve_operands(const AttnArgs& args);

// The full problem. `cu_q`, `cu_k`, `used_q`, `used_k` are host copies of the index arrays
// (empty vectors when absent). Assumes args passed validation.
Problem resolve_problem(const AttnArgs& args, const std::vector<int32_t>& cu_q,
                        const std::vector<int32_t>& cu_k, const std::vector<int32_t>& used_q,
                        const std::vector<int32_t>& used_k);

// The view of a validated block mask (heads_q: the call's query heads).
BlockMaskView resolve_block_mask(const BlockMask& m, int32_t heads_q);
BitMaskView resolve_bit_mask(const BitMask& m, int32_t heads_q);
// The view of a validated bias or dbias tensor (4-D, unit last stride).
BiasView resolve_bias(const Tensor& t, int32_t heads_q);

// Operand view of a q/k/v/out-like tensor (lse-like when `is_lse`).
Operand make_operand(const Tensor& t, bool varlen, bool is_lse = false);

}  // namespace fastattn::detail
