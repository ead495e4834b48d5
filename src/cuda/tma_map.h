// Host side of TMA: encodes a CUtensorMap for a (batch, seq, heads, dim) operand, tiled into
// 64-column x `box_rows` x `box_heads` boxes with the 128-byte swizzle that wgmma descriptors
// expect (a box lands in smem as box_heads * box_rows consecutive 128-byte rows, head-major).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "api/problem.h"
#include "cuda/tma_stride_rule.h"

namespace fastattn::cuda_backend {

// One operand of a resolved problem as TMA sees it: four dims, innermost (dim) contiguous.
// A varlen operand (total, h, d) is a batch of one sequence of `rows` = total tokens.
struct TmaTensor {
  void* data = nullptr;
  DType dtype = DType::F16;
  bool varlen = false;
  int64_t batch = 0, rows = 0, heads = 0, dim = 0;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;  // in elements
};

enum class Role { Q, K, V, Out };
TmaTensor tma_tensor(const detail::Problem& p, Role role);
// Another operand of `role`'s shape (the backward's dO is out's).
TmaTensor tma_tensor(const detail::Problem& p, Role role, const detail::Operand& o);
// A (b, s, h, d) or varlen (total, h, d) tensor with unit last stride (the GPU unit tests' maps).
TmaTensor tma_tensor(const Tensor& t);

// Strides must be multiples of 16 bytes (checked before, in check_forward).
Status make_tma_map(const TmaTensor& t, int box_rows, CUtensorMap* out, int box_heads = 1);

// The same tensor seen as (64 columns, rows, dim / 64 atoms, heads, batch), one box = `box_rows`
// rows of every atom: it lands as [atom][box_rows] 128-byte rows (a paged cache's key half,
// sm90 SplitConfig's PageHalves). dim a multiple of 64.
Status make_tma_map_by_atom(const TmaTensor& t, int box_rows, CUtensorMap* out);

// Base 16-byte aligned and every dim longer than 1 by tma_stride_ok (a positive multiple of 16 bytes);
// an operand with no element passes (it is never read; its dense strides may be 0).
bool aligned16(const TmaTensor& t);

// Whether TMA can store into `t` tile by tile: fixed-length and aligned16.
bool tma_storable(const TmaTensor& t);

}  // namespace fastattn::cuda_backend
