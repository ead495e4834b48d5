// Host launch of the Hopper forward with an additive bias (AttnArgs::bias), for one (dtype, head dim
// <= 128, d_v = d): the head dim's default config as a BiasConfig (fwd/config.h) and one kernel
// launch. What it cannot run is refused before (cuda/bias_rule.h): split-KV, d > 128, d_v != d, a bias
// of another dtype than q, a base not aligned to its element. Any strides run: the staged path takes the
// layouts its 16-byte copies allow, the others read element by element.
#pragma once

#include "cuda/sm90/fwd/launch.cuh"

namespace fastattn::sm90 {

template <class T, int D, int DV>
Status launch_fwd_bias(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  static_assert(D == DV && D <= 128, "bias forward: d <= 128 with d_v = d");
  using Cfg = BiasConfig<typename DefaultConfig<D, DV>::type>;
  cuda_backend::LaunchProblem bl = lp;
  bl.num_splits = 1;                  // num_splits > 1 is refused by bias_rule; 0 runs unsplit
  bl.pack = cuda_backend::GqaPack{};  // a tile's rows are one head's: one bias head per tile
  return launch_cfg<T, Cfg>(bl, stream);
}

}  // namespace fastattn::sm90
