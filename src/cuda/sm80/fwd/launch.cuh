// Host launch of the Ampere forward for one (dtype, head dim): the schedule (plan_schedule's tile
// space and order, without GQA packing), smem size, and one CTA per tile.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/device_info.h"
#include "cuda/launch_plan.h"
#include "cuda/sched/split_plan.h"
#include "cuda/split_forward.h"
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

// kDecode (kernel.cuh): a KV cache's addressing and, with `splits` > 1, the split-KV partials and their
// combine; `base`: the split plan's tile space (plan_splits), not planned again.
template <class T, class Cfg, bool kDecode = false>
Status launch_cfg(const cuda_backend::LaunchProblem& lp_in, cudaStream_t stream, int splits = 1,
                  const cuda_backend::TileSpace* base = nullptr) {
  const detail::Problem& pr = *lp_in.problem;
  // Not a GQA-packed schedule: a tile is one q head's rows (the kernel addresses them so).
  cuda_backend::LaunchProblem lp = lp_in;
  lp.pack = cuda_backend::GqaPack{};
  Sm80FwdParams params;
  params.attn = lp.attn;
  params.q = operand80(pr.q);
  params.k = operand80(pr.k);
  params.v = operand80(pr.v);
  params.kv = lp.kv;
  cuda_backend::ScheduleShape shape;
  shape.tile_rows = Cfg::kBlockM;
  shape.pad_first_ok = false;  // the kernel's m-blocks start at row 0
  shape.kv_bytes_per_slot = int64_t(lp.attn.seqlen_k) * (pr.head_dim + pr.head_dim_v) * int64_t(sizeof(T));
  shape.planned = base;
  int ctas = 0;  // the persistent grid's size: unused, one CTA per tile (several fit an SM)
  if (Status st = cuda_backend::plan_schedule(lp, shape, &params.sched, &ctas); !st.ok()) return st;
  auto kernel = fwd_kernel<T, Cfg, kDecode>;
  constexpr int smem = Cfg::kSmemBytes;
  static_assert(smem <= 99 * 1024, "the sm80 forward must fit an sm_86 / sm_89 SM's 99 KB");
  static cuda_backend::PerDeviceFlags attr_set;  // per instantiation
  if (Status st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set); !st.ok())
    return st;
  if (params.sched.tiles == 0) return Status::Ok();
  const int64_t blocks = int64_t(params.sched.tiles) * splits;
  if (blocks > INT32_MAX) return Status::Unsupported("num_splits: more than 2^31 tiles x splits");
  cuda_backend::SplitBuffers parts;
  if (splits > 1) {
    if (!kDecode) return Status::Unsupported("internal: split-KV needs the sm80 decode kernel");
    if (Status st = cuda_backend::split_buffers(lp, splits, stream, &parts); !st.ok()) return st;
    params.split.splits = cuda_backend::FastDiv(unsigned(splits));
    params.split.o_part = parts.o;
    params.split.lse_part = parts.lse;
    params.split.rows = parts.rows;
    params.split.rows_per_head = parts.rows_per_head;
  }
  kernel<<<unsigned(blocks), Cfg::kThreads, smem, stream>>>(params);
  const cudaError_t e = cudaGetLastError();
  if (splits > 1) {  // the combine (a plain launch: the sm80 kernel triggers no early dependents)
    Status st = cuda_backend::split_finish(lp, splits, parts, e == cudaSuccess, stream, /*early_launch=*/false);
    if (e == cudaSuccess && !st.ok()) return st;
  }
  if (e != cudaSuccess) return {Code::CudaError, std::string("forward launch (sm80): ") + cudaGetErrorString(e)};
  return Status::Ok();
}

// The decode kernel where a call needs it: a KV cache addressed through cache_batch_idx, leftpad or a page
// table, or a split of a forward_kvcache call's keys (num_splits > 1, or 0 where the split heuristic finds idle
// SMs). Other forwards take num_splits as a hint and run unsplit: the decode twin's varlen, seqused_q and
// multi-m-block splits have not run on a GPU yet (kvcache calls are fixed-length). Its config
// (Sm80DefaultConfig::decode) takes half the keys a block of the plain one: the cache's addressing and the
// partials' store beside the plain tile's S and O spilled at the 255-register bound. The heuristic
// (sched/split_plan.h) counts CTA slots: sm80 CTAs are not persistent and two fit an SM where shared memory
// allows (255 registers x 128 threads), so it is given SMs x CTAs an SM.
template <class T, int D, class Plain>
Status launch_plain_or_decode(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  using Decode = typename Sm80DefaultConfig<D>::decode;
  if (lp.kvcache_call && lp.num_splits != 1) {
    int sms = 0, smem = 0;
    if (Status st = cuda_backend::sm_count(&sms); !st.ok()) return st;
    if (Status st = cuda_backend::smem_per_sm(&smem); !st.ok()) return st;
    constexpr int kByRegisters = 2, kReserved = 1024;
    const int per_sm = std::max(1, std::min(kByRegisters, smem / (Decode::kSmemBytes + kReserved)));
    const cuda_backend::SplitPlan plan = cuda_backend::plan_splits(lp.num_splits, lp.attn, lp.mask, cuda_backend::GqaPack{},
                                                                   Decode::kBlockM, Decode::kBlockN, sms * per_sm,
                                                                   /*hbm: rate measured on sm90 only*/ 0);
    // (plan.base is the sm90 split kernel's, which may put padding rows first (pad_first_ok): the sm80
    // kernel plans its own)
    if (plan.splits > 1) return launch_cfg<T, Decode, true>(lp, stream, plan.splits);
  }
  if (lp.kv.batch_idx != nullptr || lp.kv.leftpad != nullptr || lp.kv.page_table != nullptr)
    return launch_cfg<T, Decode, true>(lp, stream);
  return launch_cfg<T, Plain>(lp, stream);
}

template <class T, int D, int DV>
Status launch_fwd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  static_assert(D == DV, "the sm80 forward has d_v = d rows only");
  if constexpr (D == 128) {
    int smem = 0;
    if (Status st = cuda_backend::smem_per_sm(&smem); !st.ok()) return st;
    if (ring_at_d128(smem)) return launch_plain_or_decode<T, D, typename Sm80DefaultConfig<D>::ring>(lp, stream);
  }
  return launch_plain_or_decode<T, D, typename Sm80DefaultConfig<D>::type>(lp, stream);
}

}  // namespace fastattn::sm80
