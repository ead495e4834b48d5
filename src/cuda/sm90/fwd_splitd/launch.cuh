// Host launch of the Hopper split-D forward for one dtype: tensor maps (64-column x 64-row boxes of
// Q, K and V), the grid (m-blocks x slice pairs, heads, batch) and the smem size. Every (d_qk, d_v)
// of cuda/splitd_rule.h runs the one kernel per dtype of kernel.cuh. The ring's depth is a kernel
// parameter: Q's unused chunks join it (docs/notes/splitd-sm90.md, "a ring as deep as Q's unused
// smem"; measured +15-17 % at d 320 / 512 over a fixed 10-slot ring). FASTATTN_SPLITD_LOCKSTEP=1
// runs the former lockstep schedule (splitd_consume) instead of the pipelined one: a temporary
// switch for one device A/B, removed once measured.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/device_info.h"
#include "cuda/launch_plan.h"
#include "cuda/splitd_rule.h"
#include "cuda/sm90/fwd_splitd/api.h"
#include "cuda/sm90/fwd_splitd/kernel.cuh"
#include "cuda/tma_map.h"

namespace fastattn::sm90 {

constexpr int splitd_smem_bytes() { return int(sizeof(SplitDSmem)) + 1024; }  // + slack to align the base
static_assert(splitd_smem_bytes() <= 227 * 1024, "the split-D forward's shared memory exceeds sm_90's 227 KB");

// The pipelined schedule unless FASTATTN_SPLITD_LOCKSTEP=1 (read per call: the tests and the bench
// run both in one process).
inline bool splitd_lockstep() {
  const char* v = std::getenv("FASTATTN_SPLITD_LOCKSTEP");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

template <class T>
Status launch_fwd_splitd(const cuda_backend::LaunchProblem& lp, cudaStream_t stream) {
  using Cfg = SplitDConfig;
  using cuda_backend::Role;
  using cuda_backend::tma_tensor;
  const detail::Problem& pr = *lp.problem;
  if (!cuda_backend::splitd_dims(pr.head_dim, pr.head_dim_v))
    return Status::Unsupported("internal: the split-D forward takes head dims " +
                               std::string(cuda_backend::splitd_dims_text()));
  SplitDParams p;
  p.attn = lp.attn;
  p.qk_atoms = pr.head_dim / kAtomCols;
  p.v_atoms = pr.head_dim_v / kAtomCols;
  p.pairs = (p.v_atoms + Cfg::kPairAtoms - 1) / Cfg::kPairAtoms;
  p.m_blocks = (lp.attn.seqlen_q + Cfg::kRows - 1) / Cfg::kRows;  // varlen: seqlen_q is max_seqlen_q
  p.ring0 = p.qk_atoms;  // the ring starts after Q's atoms
  p.ring_slots = Cfg::kChunks - p.ring0;
  if (p.m_blocks == 0 || lp.attn.batch == 0 || lp.attn.heads_q == 0) return Status::Ok();
  if (lp.attn.batch > 65535 || lp.attn.heads_q > 65535 || int64_t(p.m_blocks) * p.pairs > INT32_MAX)
    return Status::Unsupported("q: the split-D forward's grid takes batch and heads up to 65535");
  CUtensorMap tq, tk, tv;
  Status st = cuda_backend::make_tma_map(tma_tensor(pr, Role::Q), Cfg::kRows, &tq);
  if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::K), Cfg::kHalfKeys, &tk);
  if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::V), Cfg::kHalfKeys, &tv);
  if (!st.ok()) return st;
  const bool lockstep = splitd_lockstep();
  auto kernel = lockstep ? splitd_fwd_kernel<T, false> : splitd_fwd_kernel<T, true>;
  const int smem = splitd_smem_bytes();
  static cuda_backend::PerDeviceFlags attr_set[2];  // per instantiation and kernel
  if (st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set[lockstep]);
      !st.ok())
    return st;
  const dim3 grid(unsigned(p.m_blocks * p.pairs), unsigned(lp.attn.heads_q), unsigned(lp.attn.batch));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(tq, tk, tv, p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {Code::CudaError, std::string("split-D forward launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace fastattn::sm90
