// Host launch of the Ampere backward for one (dtype, head dim): the Hopper backward's preprocess (D,
// lse_log2, the dQ accumulator's clear) and postprocess (dq = scale x accumulator), both plain CUDA,
// built here for sm_80 on a 64-row q-block layout, around the sm80 main kernel (one CTA per key block
// of 128, KV head and sequence). The host (bwd_backend.cu) has sized the workspace for 64-row q-blocks.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/sm80/bwd/api.h"
#include "cuda/sm80/bwd/kernel.cuh"
#include "cuda/sm80/fwd/launch.cuh"  // operand80
#include "cuda/sm90/bwd/preprocess.cuh"

namespace fastattn::sm80 {

// What the pre- and postprocess read of a config: 64-row q-blocks, stats in row order, the dQ run in
// the m16 fragment order with all of d as "warpgroup 0's" columns (dq_layout.h), not transposed.
template <int D>
struct Sm80BwdAux {
  static constexpr int kHeadDim = D, kHeadDimV = D, kBlockM = Sm80BwdConfig<D>::kBlockM, kDqCols0 = D;
  static constexpr bool kStatsByQuad = false, kDqTransposed = false;
};

inline Status launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {Code::CudaError, std::string(what) + " (sm80): " + cudaGetErrorString(e)};
  return Status::Ok();
}

template <class T, int D>
Status launch_bwd(const detail::Problem& problem, const detail::GradOperands& grads, const cuda_backend::BwdParams& bp,
                  cudaStream_t stream) {
  using Cfg = Sm80BwdConfig<D>;
  static_assert(Cfg::kSmemBytes == bwd_smem_bytes(D), "api.h's smem formula");
  if (bp.block_m != Cfg::kBlockM) return Status::Unsupported("backward (sm80): the workspace is not of 64-row q-blocks");
  Sm80BwdParams p;
  p.bwd = bp;
  p.bwd.n_blocks = (bp.attn.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  p.q = operand80(problem.q);
  p.k = operand80(problem.k);
  p.v = operand80(problem.v);
  const dim3 aux_grid(unsigned(bp.m_blocks), unsigned(bp.attn.heads_q), unsigned(bp.attn.batch));
  if (bp.m_blocks > 0) {
    sm90::bwd_preprocess_kernel<T, Sm80BwdAux<D>, false><<<aux_grid, sm90::kBwdAuxThreads, 0, stream>>>(bp);
    if (Status st = launched("backward preprocess launch"); !st.ok()) return st;
  }
  const dim3 grid(unsigned(p.bwd.n_blocks), unsigned(bp.attn.heads_kv), unsigned(bp.attn.batch));
  if (p.bwd.n_blocks > 0) {  // also without q rows: it writes dk = dv = 0
    auto kernel = bwd_kernel<T, Cfg>;
    static cuda_backend::PerDeviceFlags attr_set;
    if (Status st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), Cfg::kSmemBytes, attr_set);
        !st.ok())
      return st;
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
    if (Status st = launched("backward launch"); !st.ok()) return st;
  }
  if (bp.m_blocks > 0) {
    sm90::bwd_postprocess_kernel<T, Sm80BwdAux<D>><<<aux_grid, sm90::kBwdAuxThreads, 0, stream>>>(bp);
    if (Status st = launched("backward postprocess launch"); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace fastattn::sm80
