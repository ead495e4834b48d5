#include "cuda/split_forward.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/env_switch.h"
#include "cuda/sched/split_plan.h"
#include "cuda/split_combine.h"
#include "cuda/stream_alloc.h"

namespace fastattn::cuda_backend {

namespace {
std::atomic<int>& cluster_merge_setting() {
  static std::atomic<int> allowed{[] {
    const char* v = std::getenv("FASTATTN_SPLIT_MERGE");
    return v != nullptr && std::strcmp(v, "kernel") == 0 ? 0 : 1;
  }()};
  return allowed;
}
std::atomic<int>& narrow_tiles_setting() {
  static std::atomic<int> allowed{env_switch("FASTATTN_NARROW_TILES", true) ? 1 : 0};
  return allowed;
}
}  // namespace

bool cluster_merge_allowed() { return cluster_merge_setting().load(std::memory_order_relaxed) != 0; }
void set_cluster_merge_allowed(bool allowed) { cluster_merge_setting().store(allowed ? 1 : 0, std::memory_order_relaxed); }
bool narrow_tiles_allowed() { return narrow_tiles_setting().load(std::memory_order_relaxed) != 0; }
void set_narrow_tiles_allowed(bool allowed) { narrow_tiles_setting().store(allowed ? 1 : 0, std::memory_order_relaxed); }

Status split_buffers(const LaunchProblem& lp, int splits, cudaStream_t stream, SplitBuffers* b) {
  const detail::Problem& p = *lp.problem;
  b->rows_per_head = p.varlen ? p.total_q : lp.attn.seqlen_q;
  b->rows = split_rows(lp.attn, p.total_q);
  const int64_t bytes = split_workspace_bytes(splits, b->rows, p.head_dim_v);
  if (Status st = stream_alloc(size_t(bytes), stream, "num_splits: the split workspace", &b->base); !st.ok())
    return st;
  b->o = static_cast<float*>(b->base);
  b->lse = reinterpret_cast<float*>(static_cast<char*>(b->base) + (bytes - int64_t(splits) * b->rows * 4));
  return Status::Ok();
}

Status split_finish(const LaunchProblem& lp, int splits, const SplitBuffers& b, bool launched, cudaStream_t stream,
                    bool early_launch) {
  const detail::Problem& p = *lp.problem;
  Status st = Status::Ok();
  if (launched) {
    SplitCombineParams c;
    c.splits = splits;
    c.dv = p.head_dim_v;
    c.batch = p.varlen ? 1 : p.batch;
    c.heads = p.heads_q;
    c.seqlen_q = int(b.rows_per_head);
    if (p.varlen) {
      c.cu_seqlens_q = p.seq_arrays.cu_q;
      c.varlen_batch = p.batch;
    }
    c.o = b.o;
    c.lse = b.lse;
    c.out = p.out.data;
    c.out_dtype = p.dtype;
    c.early_launch = early_launch;  // the sm90 split kernels trigger their dependents at their start
    c.out_stride_b = p.out.batch_stride;
    c.out_stride_s = p.out.token_stride;
    c.out_stride_h = p.out.head_stride;
    if (p.lse.defined()) {
      c.lse_out = static_cast<float*>(p.lse.data);
      c.lse_stride_b = p.lse.batch_stride;
      c.lse_stride_h = p.lse.head_stride;
      c.lse_stride_s = p.lse.token_stride;
    }
    st = combine_splits(c, stream);
  }
  if (cudaError_t e = stream_free(b.base, stream); e != cudaSuccess && st.ok())
    st = {Code::CudaError, std::string("num_splits: cudaFreeAsync of the split workspace: ") + cudaGetErrorString(e)};
  return st;
}

}  // namespace fastattn::cuda_backend
