// Host launch of the Hopper forward with an element bitmask, for one (dtype, head dim <= 128): the
// block-sparse base config (launch_block_sparse.cuh) as a BitmaskConfig (fwd/config.h), the two prep
// launches (fwd/bit_lists.h) and the kernel. What it cannot run is refused before
// (cuda/block_mask_rule.h): split-KV, d > 128, d_v != d, lists past 2^31 entries.
#pragma once

#include "cuda/sm90/fwd/launch_block_sparse.cuh"

namespace fastattn::sm90 {

template <class T, int D, int DV>
Status launch_fwd_bitmask(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  static_assert(D == DV && D <= 128, "bitmask forward: d <= 128 with d_v = d");
  using Cfg = BitmaskConfig<typename BlockSparseBase<D>::type>;
  static_assert(Cfg::kBlockM == kBlockListTileRows && Cfg::kBlockN == kBlockListTileKeys,
                "the prep's tiles are the kernel's");
  cuda_backend::LaunchProblem bl = lp;
  bl.num_splits = 1;                    // an explicit num_splits > 1 is refused by block_mask_support
  bl.pack = cuda_backend::GqaPack{};    // a tile's rows are one head's 128 rows: one line of the bits
  if (lp.problem->biased()) return launch_cfg<T, BiasConfig<Cfg>>(bl, stream);  // the bias twin
  return launch_cfg<T, Cfg>(bl, stream);
}

}  // namespace fastattn::sm90
