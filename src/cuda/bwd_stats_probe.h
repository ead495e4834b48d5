// Test hook of the CUDA backward (internal, not in the public API): the workspace's lse_log2 and D
// arrays, which the preprocess writes and the main kernel reads, for the GPU tests' direct check of
// them (tests/gpu/bwd_stats_sm90_test.cpp). While a probe is set, each backward fills both arrays
// with 0xFF bytes (NaN) before its kernels, so that a row nobody wrote stays recognisable, and after
// its kernels copies them into the probe's buffers (stream-ordered, before the workspace is freed)
// and records the layout it used. No probe (the default): the backward does none of this.
#pragma once

#include <cstdint>

namespace fastattn::cuda_backend {

struct BwdStatsProbe {
  // Set by the caller: device buffers of `capacity` floats each.
  float* lse_log2 = nullptr;
  float* dpsum = nullptr;
  int64_t capacity = 0;
  // Written by the backward: floats copied into each buffer (q heads x padded_rows; 0 when it had no
  // workspace), the workspace's rows per q head, its q-block size, and whether dQ went through the
  // ring (the preprocess instance that prepares it), or through the recompute band (sm90/bwd/band.h).
  int64_t copied = 0;
  int64_t padded_rows = 0;
  int block_m = 0;
  bool ring = false;
  bool band = false;
  int tail_pieces = 0;  // the wave tail's pieces a split tile (sm90/bwd/wave_tail.h; 0: no split)
};

// The probe in force (nullptr: none). A plain global, for single-threaded tests.
BwdStatsProbe* bwd_stats_probe();
void set_bwd_stats_probe(BwdStatsProbe* probe);

}  // namespace fastattn::cuda_backend
