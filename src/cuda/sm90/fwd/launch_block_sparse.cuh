// Host launch of the Hopper forward with a block-sparse mask, for one (dtype, head dim <= 128):
// the head dim's 128 x 128 config as a BlockSparseConfig (fwd/config.h), one launch of the list
// builder (fwd/block_lists.h) and one of the kernel. What the kernels cannot run is refused before
// (cuda/block_mask_rule.h): split-KV, tiles across mask blocks, d > 128, d_v != d.
#pragma once

#include "cuda/block_mask_rule.h"
#include "cuda/sm90/fwd/launch.cuh"

namespace fastattn::sm90 {

// The base configs: d 96 and 128's default (128 x 128, two stages); d 64's short-key one (128 x
// 128, three stages; its default takes 192 keys a tile, which a 128-key mask block would cut).
template <int D>
struct BlockSparseBase {
  using type = FwdConfig<D>;
};
template <>
struct BlockSparseBase<64> {
  using type = FwdConfig<64, 128, 3>;
};

template <class T, int D, int DV>
Status launch_fwd_block_sparse(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  static_assert(D == DV && D <= 128, "block-sparse forward: d <= 128 with d_v = d");
  using Cfg = BlockSparseConfig<typename BlockSparseBase<D>::type>;
  static_assert(Cfg::kBlockM == kBlockListTileRows && Cfg::kBlockN == kBlockListTileKeys,
                "the list builder's tiles are the kernel's");
  static_assert(Cfg::kBlockM == cuda_backend::kBlockSparseTileRows && Cfg::kBlockN == cuda_backend::kBlockSparseTileKeys,
                "block_mask_support's alignment rule is the kernel's tile");
  cuda_backend::LaunchProblem bl = lp;
  bl.num_splits = 1;  // an explicit num_splits > 1 is refused by block_mask_support
  // GQA packing puts several q heads in a tile: only where they share a mask head (and no bias:
  // a bias tile is one head's rows).
  if (!cuda_backend::block_mask_packs(*lp.problem) || lp.problem->biased()) bl.pack = cuda_backend::GqaPack{};
  if (lp.problem->biased()) return launch_cfg<T, BiasConfig<Cfg>>(bl, stream);  // the bias twin
  return launch_cfg<T, Cfg>(bl, stream);
}

}  // namespace fastattn::sm90
