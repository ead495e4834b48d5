// Host launch of the Hopper split-D forward for one dtype: tensor maps (64-column x 64-row boxes of
// Q, K and V; GQA-packed: Q boxes of R rows x 64 / R heads), the grid (m-blocks x slice pairs x
// splits, head slots, batch; sched/splitd_plan.h), the split workspace and combine (split-KV), and
// the smem size. Every (d_qk, d_v) of cuda/splitd_rule.h runs the one kernel per dtype of
// kernel.cuh, in two schedules (splitd_lockstep_schedule picks one). The ring's depth is a kernel
// parameter: Q's unused chunks join it (docs/notes/splitd-sm90.md, "a ring as deep as Q's unused smem";
// measured +15-17 % at d 320 / 512 over a fixed 10-slot ring). FASTATTN_SPLITD_LOCKSTEP=1 / 0 forces the
// lockstep / pipelined schedule (tests and A/B benches run both in one process).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/device_info.h"
#include "cuda/launch_plan.h"
#include "cuda/sched/splitd_plan.h"
#include "cuda/split_forward.h"
#include "cuda/splitd_rule.h"
#include "cuda/sm90/fwd_splitd/api.h"
#include "cuda/sm90/fwd_splitd/kernel.cuh"
#include "cuda/tma_map.h"

namespace fastattn::sm90 {

constexpr int splitd_smem_bytes() { return int(sizeof(SplitDSmem)) + 1024; }  // + slack to align the base
static_assert(splitd_smem_bytes() <= 227 * 1024, "the split-D forward's shared memory exceeds sm_90's 227 KB");

// The rule's schedule unless FASTATTN_SPLITD_LOCKSTEP is 1 or 0 (read per call).
inline bool splitd_lockstep(int d_qk, int window_right) {
  const char* v = std::getenv("FASTATTN_SPLITD_LOCKSTEP");
  if (v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "0") == 0)) return v[0] == '1';
  return cuda_backend::splitd_lockstep_schedule(d_qk, window_right);
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
  const cuda_backend::SplitDGrid g = cuda_backend::splitd_grid(lp.attn, pr.head_dim_v, pr.varlen);
  SplitDParams p;
  p.attn = lp.attn;
  p.qk_atoms = pr.head_dim / kAtomCols;
  p.v_atoms = pr.head_dim_v / kAtomCols;
  p.pairs = g.pairs;
  p.m_blocks = g.m_blocks;
  p.ring0 = p.qk_atoms;  // the ring starts after Q's atoms
  p.ring_slots = Cfg::kChunks - p.ring0;
  const int pack_rows = g.pack.rows > 0 ? g.pack.rows : Cfg::kRows;
  p.row_pos_mask = pack_rows - 1;
  p.row_head_shift = 0;
  while ((1 << p.row_head_shift) < pack_rows) ++p.row_head_shift;
  p.pack_heads = g.pack.rows > 0 ? g.pack.heads : 1;
  p.pack_groups = g.pack.rows > 0 ? g.pack.groups : 0;
  if (g.tiles == 0) return Status::Ok();
  int sms = 0;
  if (lp.num_splits != 1) {
    if (Status st = cuda_backend::sm_count(&sms); !st.ok()) return st;
  }
  p.splits = cuda_backend::splitd_splits(lp.num_splits, g, lp.attn, sms);
  if (lp.attn.batch > 65535 || g.head_slots > 65535 || int64_t(p.m_blocks) * p.pairs * p.splits > INT32_MAX)
    return Status::Unsupported("q: the split-D forward's grid takes batch and heads up to 65535 (and m-blocks x "
                               "splits below 2^31)");
  CUtensorMap tq, tk, tv;
  Status st = cuda_backend::make_tma_map(tma_tensor(pr, Role::Q), pack_rows, &tq, Cfg::kRows / pack_rows);
  if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::K), Cfg::kHalfKeys, &tk);
  if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(pr, Role::V), Cfg::kHalfKeys, &tv);
  if (!st.ok()) return st;
  const bool lockstep = splitd_lockstep(pr.head_dim, lp.attn.window_right);
  auto kernel = lockstep ? splitd_fwd_kernel<T, false> : splitd_fwd_kernel<T, true>;
  const int smem = splitd_smem_bytes();
  static cuda_backend::PerDeviceFlags attr_set[2];  // per instantiation and kernel
  if (st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set[lockstep]);
      !st.ok())
    return st;
  cuda_backend::SplitBuffers parts;
  if (p.splits > 1) {
    if (st = cuda_backend::split_buffers(lp, p.splits, stream, &parts); !st.ok()) return st;
    p.o_part = parts.o;
    p.lse_part = parts.lse;
    p.part_rows = parts.rows;
    p.part_rows_per_head = parts.rows_per_head;
  } else {
    p.o_part = p.lse_part = nullptr;
    p.part_rows = p.part_rows_per_head = 0;
  }
  const dim3 grid(unsigned(p.m_blocks * p.pairs * p.splits), unsigned(g.head_slots), unsigned(lp.attn.batch));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(tq, tk, tv, p);
  const cudaError_t launched = cudaGetLastError();
  if (p.splits > 1) {
    st = cuda_backend::split_finish(lp, p.splits, parts, launched == cudaSuccess, stream);
    if (launched == cudaSuccess && !st.ok()) return st;
  }
  if (cudaError_t e = launched; e != cudaSuccess)
    return {Code::CudaError, std::string("split-D forward launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

}  // namespace fastattn::sm90
