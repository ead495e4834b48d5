// The host side of a split-KV forward launch, around the split kernel: its workspace (fp32
// partial O and LSE, stream-ordered (stream_alloc.h), so the call stays capturable in a CUDA graph
// with no host sync) and the combine into out and lse.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch_plan.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

struct SplitBuffers {
  void* base = nullptr;
  float* o = nullptr;          // (splits, rows, d_v)
  float* lse = nullptr;        // (splits, rows)
  int64_t rows = 0;            // rows of one split (sched/split_plan.h: split_rows)
  int64_t rows_per_head = 0;   // seqlen_q, or total_q when varlen
};

// Whether split launches may merge their splits inside thread-block clusters where the plan allows
// (sched/split_plan.h: merge_in_cluster): yes, unless the environment holds
// FASTATTN_SPLIT_MERGE=kernel (the combine kernel always: A/B on one build) or a test set it off.
bool cluster_merge_allowed();
void set_cluster_merge_allowed(bool allowed);

// Whether split tiles of at most 8 stored rows run as narrow (swapped) tiles where the kernel has
// them (sm90/fwd/launch_split.cuh: narrow_rows_fit): yes, unless the environment holds
// FASTATTN_NARROW_TILES=0 (the 64-row tile always: A/B on one build) or a test set it off.
bool narrow_tiles_allowed();
void set_narrow_tiles_allowed(bool allowed);

// Allocates the partials of `splits` splits of lp's problem on `stream`.
Status split_buffers(const LaunchProblem& lp, int splits, cudaStream_t stream, SplitBuffers* b);

// Merges the partials into out and lse (cuda/split_combine.h) when `launched`, then frees them;
// both on `stream`. early_launch: the combine may start before the split kernel ends (the sm90 split
// kernels trigger their dependents; the sm80 one does not: false).
Status split_finish(const LaunchProblem& lp, int splits, const SplitBuffers& b, bool launched, cudaStream_t stream,
                    bool early_launch = true);

}  // namespace fastattn::cuda_backend
