// Host launch of the Hopper forward's split-KV kernel for one (dtype, d, d_v): SplitBase<D, DV>
// (launch.cuh) as a SplitConfig, whatever the problem (launch_fwd's alternative configs are tuned
// for long unsplit rows). Included only by the generated fwd_split_<dtype>_d<dim>.cu, so that each
// kernel compiles in its own unit; launch_fwd (launch.cuh) calls it through api.h.
#pragma once

#include "cuda/sm90/fwd/launch.cuh"

namespace fastattn::sm90 {

// The splits merged in thread-block clusters where the plan fits (sched/split_plan.h:
// merge_in_cluster; FASTATTN_SPLIT_MERGE=kernel turns it off), else by the combine kernel.
// The plan's base tile space (planned on Base's rows) is the one both configs schedule.
// Wrap: the split config as launched (identity, or NarrowConfig for narrow tiles).
template <class T, class Base, bool PageHalves, template <class> class Wrap>
Status launch_split_merge(const cuda_backend::LaunchProblem& lp, const cuda_backend::SplitPlan& plan,
                          cudaStream_t stream) {
  using Plain = Wrap<SplitConfig<Base, PageHalves>>;
  const int splits = plan.splits;
  if constexpr (Plain::kQBuffers == 2) {
    if (cuda_backend::cluster_merge_allowed()) {
      using InCluster = Wrap<SplitConfig<Base, PageHalves, true>>;
      const int clusters = clusters_at_once<T, InCluster>(fwd_smem_bytes<InCluster>(), splits);
      if (cuda_backend::merge_in_cluster(splits, plan.base, lp.pack, lp.attn.seqlen_q, clusters))
        return launch_cfg<T, InCluster>(lp, stream, splits, &plan.base);
    }
  }
  return launch_cfg<T, Plain>(lp, stream, splits, &plan.base);
}

template <class Cfg>
using AsLaunched = Cfg;

// Narrow decode tiles (fwd/narrow_rows.cuh): 64-key blocks through a 4-stage ring (128 KB, as 4 x 32 KB
// streamed 7 % faster than 2 x 64 KB in bench/proto/swapab_decode_probe.cu), two Q buffers (the cluster
// merge's slots). The d = 128 narrow-window config's layout.
using NarrowBase = FwdConfig<128, 64, 4, 2>;

// d = 128 over a paged cache whose pages hold half a key block (page 64, 192, ...): the key-half
// layout, 2 TMA copies a K or V tile instead of 4 (config.h, SplitConfig's PageHalves). The same
// sums in the same order as the contiguous cache's kernel, so paged and contiguous calls stay
// bitwise equal. Decode tiles of at most 8 stored rows and short key shares (sched/split_plan.h:
// narrow_rows_fit; the same rule paged or not, so both caches keep one kernel's sums) run as narrow
// tiles where the kernel has them (d = d_v = 128).
template <class T, int D, int DV>
Status launch_fwd_split(const cuda_backend::LaunchProblem& lp, const cuda_backend::SplitPlan& plan,
                        cudaStream_t stream) {
  using Base = typename SplitBase<D, DV>::type;
  if constexpr (D == 128 && DV == 128) {
    if (cuda_backend::narrow_tiles_allowed() &&
        cuda_backend::narrow_rows_fit(lp.pack, lp.attn.seqlen_q, plan.base.s, lp.attn.seqlen_k, plan.splits))
      return launch_split_merge<T, NarrowBase, false, NarrowConfig>(lp, plan, stream);
  }
  if constexpr (D == 128 && DV == 128 && Base::kBlockN == 128) {
    const bool half_pages = lp.kv.page_table != nullptr && std::gcd(int(lp.kv.page_size.d), Base::kBlockN) == 64 &&
                            lp.problem->head_dim_v == D;
    if (half_pages) return launch_split_merge<T, Base, true, AsLaunched>(lp, plan, stream);
  }
  return launch_split_merge<T, Base, false, AsLaunched>(lp, plan, stream);
}

#ifdef FASTATTN_SPLIT_STAMPS
// The stamps of this unit's last split launch (split_stamps.cuh): kStampWords per CTA, `ctas` CTAs.
template <class T, int D, int DV = D>
cudaError_t read_split_stamps(unsigned long long* out, int ctas) {
  return cudaMemcpyFromSymbol(out, g_split_stamps, sizeof(unsigned long long) * kStampWords * size_t(ctas));
}
#endif

}  // namespace fastattn::sm90
