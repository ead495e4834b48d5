// Host launch of the Ampere forward for one (dtype, head dim): the schedule (plan_schedule's tile
// space and order, without GQA packing), smem size, and one CTA per tile.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/device_info.h"
#include "cuda/launch_plan.h"
#include "cuda/sm80/fwd/api.h"
#include "cuda/sm80/fwd/kernel.cuh"

namespace fastattn::sm80 {

inline Operand80 operand80(const detail::Operand& o) {
  Operand80 r;
  r.data = o.data;
  r.stride_b = o.batch_stride;
  r.stride_s = o.token_stride;
  r.stride_h = o.head_stride;
  return r;
}

template <class T, class Cfg>
Status launch_cfg(const cuda_backend::LaunchProblem& lp_in, cudaStream_t stream) {
  const detail::Problem& pr = *lp_in.problem;
  // Not a GQA-packed schedule: a tile is one q head's rows (the kernel addresses them so).
  cuda_backend::LaunchProblem lp = lp_in;
  lp.pack = cuda_backend::GqaPack{};
  Sm80FwdParams params;
  params.attn = lp.attn;
  params.q = operand80(pr.q);
  params.k = operand80(pr.k);
  params.v = operand80(pr.v);
  cuda_backend::ScheduleShape shape;
  shape.tile_rows = Cfg::kBlockM;
  shape.pad_first_ok = false;  // the kernel's m-blocks start at row 0
  shape.kv_bytes_per_slot = int64_t(lp.attn.seqlen_k) * (pr.head_dim + pr.head_dim_v) * int64_t(sizeof(T));
  int ctas = 0;  // the persistent grid's size: unused, one CTA per tile (several fit an SM)
  if (Status st = cuda_backend::plan_schedule(lp, shape, &params.sched, &ctas); !st.ok()) return st;
  auto kernel = fwd_kernel<T, Cfg>;
  constexpr int smem = Cfg::kSmemBytes;
  static_assert(smem <= 99 * 1024, "the sm80 forward must fit an sm_86 / sm_89 SM's 99 KB");
  static cuda_backend::PerDeviceFlags attr_set;  // per instantiation
  if (Status st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set); !st.ok())
    return st;
  if (params.sched.tiles == 0) return Status::Ok();
  kernel<<<params.sched.tiles, Cfg::kThreads, smem, stream>>>(params);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {Code::CudaError, std::string("forward launch (sm80): ") + cudaGetErrorString(e)};
  return Status::Ok();
}

template <class T, int D, int DV>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  static_assert(D == DV, "the sm80 forward has d_v = d rows only");
  if constexpr (D == 128) {
    int smem = 0;
    if (Status st = cuda_backend::smem_per_sm(&smem); !st.ok()) return st;
    if (ring_at_d128(smem)) return launch_cfg<T, typename Sm80DefaultConfig<D>::ring>(lp, stream);
  }
  return launch_cfg<T, typename Sm80DefaultConfig<D>::type>(lp, stream);
}

}  // namespace fastattn::sm80
