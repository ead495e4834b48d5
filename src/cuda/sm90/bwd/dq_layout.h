// The layout of a q-block's fp32 dQ accumulator run (64 rows x D; 80-row q-blocks: below), as the main kernel adds it and
// the postprocess reads it. A 128-row q-block (d 64) is two such runs, one per warpgroup, each with
// all of d as "warpgroup 0's" columns (cols0 = D). Warpgroup w's columns [c_w, c_w + N_w) sit at float offset 64 c_w; in
// there, element (row, c_w + lc) is at 512 (i / 4) + 4 t + i % 4 for the thread t and accumulator
// index i that the wgmma layout gives it: a float4 per thread, a warp's 32 of them contiguous
// (kernel.cuh adds it so, dq.cuh). Host and device: the CPU tests check the two directions agree.
#pragma once

#include "cuda/common/host_device.h"

namespace fastattn::sm90 {

// Float offset of element (row, col); cols0 = warpgroup 0's column count.
FASTATTN_HD int dq_accum_index(int row, int col, int cols0) {
  const int c0 = col < cols0 ? 0 : cols0, lc = col - c0;
  const int i = 4 * (lc / 8) + 2 * ((row % 16) / 8) + (lc % 2);
  const int t = 32 * (row / 16) + 4 * (row % 8) + (lc % 8) / 2;
  return 64 * c0 + 512 * (i / 4) + 4 * t + i % 4;
}

// The inverse for a whole float4: float4 number f of the run holds (row, col), (row, col + 1),
// (row + 8, col), (row + 8, col + 1), in that order.
struct DqPairs {
  int row, col;
};
FASTATTN_HD DqPairs dq_accum_pairs(int f, int cols0) {
  const bool second = f >= 16 * cols0;  // warpgroup 1's columns start at float 64 cols0
  const int q4 = second ? f - 16 * cols0 : f, t = q4 % 128, lane = t % 32;
  return {16 * (t / 32) + lane / 4, (second ? cols0 : 0) + 8 * (q4 / 128) + 2 * (lane % 4)};
}

// dQ^T runs (BwdConfig::kDqTransposed: d 128's 80-row q-blocks, d 256's 80-key tile): the run
// (rows x D) holds dQ^T as the MMA leaves it, the 64-row slice w of its head-dim rows (columns
// [64 w, 64 w + 64) of dQ: a warpgroup's at d 128, half a warpgroup's at d 256) at float 64 rows w;
// in there, element (row, 64 w + lc) sits where element (lc, row) of a 64 x rows accumulator does:
// 512 (i / 4) + 4 t + i % 4, a float4 per thread as above.
FASTATTN_HD int dq_t_accum_index(int row, int col, int rows) {
  const int w = col / 64, lc = col % 64;
  const int i = 4 * (row / 8) + 2 * ((lc % 16) / 8) + (row % 2);
  const int t = 32 * (lc / 16) + 4 * (lc % 8) + (row % 8) / 2;
  return 64 * rows * w + 512 * (i / 4) + 4 * t + i % 4;
}

// Its inverse for a whole float4: float4 number f holds (row, col), (row + 1, col), (row, col + 8),
// (row + 1, col + 8), in that order.
FASTATTN_HD DqPairs dq_t_accum_quad(int f, int rows) {
  const int w = f / (16 * rows), q4 = f % (16 * rows), t = q4 % 128, lane = t % 32;
  return {8 * (q4 / 128) + 2 * (lane % 4), 64 * w + 16 * (t / 32) + lane / 4};
}

}  // namespace fastattn::sm90
