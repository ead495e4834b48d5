// What the CUDA backend runs of a block-sparse mask (MaskKind::BlockSparse, Problem::blocks): the
// rule the api layer asks before it sends a block mask to CUDA (a Status naming what the GPU
// cannot run), and the launcher's GQA packing rule. Host-only (no CUDA types).
#pragma once

#include "api/problem.h"
#include "fastattn/types.h"

namespace fastattn::cuda_backend {

// The block-sparse kernels' tile: 128 query rows x 128 keys (sm90/fwd/launch_block_sparse.cuh).
// Every tile must lie inside one mask block, so that a listed block is kept whole.
constexpr int kBlockSparseTileRows = 128, kBlockSparseTileKeys = 128;

// Ok when the CUDA backend runs p's block mask (p.blocks defined) for the forward (backward false)
// or the backward (deterministic: its mode); else NotSupported with what it cannot run: head dims
// other than d <= 128 with d_v = d, block_q or block_k not a multiple of 128, lists past 2^31
// entries (each pass's own lists); for the forward an explicit num_splits > 1; for the backward the
// deterministic mode, a softcap, or q heads of one KV head on different mask heads. (KV-cache calls
// carry no mask: KvCacheArgs has none.)
// With an element bitmask (p.bits defined): d <= 128 with d_v = d and lists below 2^31 entries; the forward
// no explicit num_splits > 1; the backward (BitmaskBwdConfig, the block-sparse backward's twin) as the
// block-sparse backward: no deterministic mode, no softcap, the q heads of a KV head on one mask head.
Status block_mask_support(const detail::Problem& p, bool backward, bool deterministic = false);

// Whether a GQA-packed tile (several q heads of one KV head, sched/gqa_pack.h) may run under p's
// mask: its heads then share one mask head (mask heads 1, or a divisor of heads_kv). Else the
// launch runs unpacked.
bool block_mask_packs(const detail::Problem& p);

}  // namespace fastattn::cuda_backend
