#include "cuda/split_forward.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/sched/split_plan.h"
#include "cuda/split_combine.h"
#include "cuda/stream_alloc.h"

namespace fastattn::cuda_backend {

namespace {

std::atomic<int> g_combine_mode{-1};  // SplitCombine, or -1 before the environment is read
std::atomic<uint64_t> g_calls{0};     // arrival tokens handed out

SplitCombine mode_from_env() {
  const char* v = std::getenv("FASTATTN_SPLIT_COMBINE");
  if (v != nullptr && std::strcmp(v, "kernel") == 0) return SplitCombine::Kernel;
  if (v != nullptr && std::strcmp(v, "in-kernel") == 0) return SplitCombine::InKernel;
  return SplitCombine::Auto;
}

}  // namespace

SplitCombine split_combine_mode() {
  int m = g_combine_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    int unset = -1;
    g_combine_mode.compare_exchange_strong(unset, int(mode_from_env()));
    m = g_combine_mode.load(std::memory_order_relaxed);
  }
  return SplitCombine(m);
}

void set_split_combine_mode(SplitCombine mode) { g_combine_mode.store(int(mode), std::memory_order_relaxed); }

Status split_buffers(const LaunchProblem& lp, int splits, int64_t arrival_words, cudaStream_t stream,
                     SplitBuffers* b) {
  const detail::Problem& p = *lp.problem;
  b->rows_per_head = p.varlen ? p.total_q : lp.attn.seqlen_q;
  b->rows = split_rows(lp.attn, p.total_q);
  const int64_t bytes = split_workspace_bytes(splits, b->rows, p.head_dim_v, arrival_words);
  if (Status st = stream_alloc(size_t(bytes), stream, "num_splits: the split workspace", &b->base); !st.ok())
    return st;
  // The parts' offsets as split_workspace_bytes lays them out.
  const int64_t o_bytes = split_workspace_bytes(splits, b->rows, p.head_dim_v) - int64_t(splits) * b->rows * 4;
  char* base = static_cast<char*>(b->base);
  b->o = reinterpret_cast<float*>(base);
  b->lse = reinterpret_cast<float*>(base + o_bytes);
  b->arrivals = nullptr;
  if (arrival_words > 0) {
    b->arrivals = reinterpret_cast<uint32_t*>(base + (bytes - arrival_words * 4));
    b->token = arrival_token(g_calls.fetch_add(1, std::memory_order_relaxed));
  }
  return Status::Ok();
}

Status split_finish(const LaunchProblem& lp, int splits, const SplitBuffers& b, bool launched, cudaStream_t stream) {
  const detail::Problem& p = *lp.problem;
  Status st = Status::Ok();
  if (launched && b.arrivals == nullptr) {
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
    c.early_launch = true;  // the sm90 split kernel triggers its dependents at its start
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
