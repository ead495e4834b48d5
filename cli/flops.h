// Work of one attention call, counted from the mask: the number of kept (query, key) pairs, and
// the FLOPs derived from it. The key ranges come from the mask oracle (src/reference).
#pragma once

#include <cstdint>

#include "reference/mask_oracle.h"

namespace fastattn::cli {

// The mask rule of the CLI's flags: causal folds into window_right = 0.
reference::MaskRule mask_rule(int64_t seqlen_q, int64_t seqlen_k, bool causal, int64_t window_left,
                              int64_t window_right);

// Kept pairs of one (batch, head), exactly.
int64_t kept_pairs(const reference::MaskRule& m);

// FLOPs: QK^T costs 2*d and PV costs 2*d_v per kept pair; backward counts as 2.5x forward
// (five matmuls against two), the convention of FlashAttention's benchmarks.
double forward_flops(int64_t batch, int64_t heads, int64_t dim, int64_t dim_v,
                     const reference::MaskRule& m);
inline double backward_flops(double fwd_flops) { return 2.5 * fwd_flops; }

}  // namespace fastattn::cli
