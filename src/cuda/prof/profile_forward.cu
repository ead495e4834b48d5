// profile_forward: the library's forward runs once as it is (the reference output), then once more
// under a stream capture; the probed kernel replays the captured graph in place of the library's
// kernel -- same grid, tensor maps and sm90::FwdParams -- so the profiling build never re-derives what the
// backend computes.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "cuda/sm90/fwd/params.h"
#include "cuda/prof/probed_run.h"
#include "fastattn/fastattn.h"

namespace fastattn::prof {
namespace {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return {Code::CudaError, std::string("profile: ") + what + ": " + cudaGetErrorString(e)};
}

Status dispatch(DType dt, int d, bool pv_sync, const CapturedLaunch& launch, const ProfileRequest& request,
                ProbeRun* run, ProfileResult* result, cudaStream_t stream) {
#define FASTATTN_PROBED_CASE(DT, CT, HD)                                              \
  if (dt == DT && d == HD)                                                            \
    return pv_sync ? run_probed<CT, HD, true>(launch, request, run, result, stream)   \
                   : run_probed<CT, HD, false>(launch, request, run, result, stream);
#include "cuda/prof/probed_dispatch.inc"
#undef FASTATTN_PROBED_CASE
  return Status::Unsupported("profile: no probed kernel for this dtype and head dim (built: " +
                             probed_kernels() + ")");
}

// Bytes from a tensor's first element to the end of its last (strides are non-negative here).
size_t span_bytes(const Tensor& t) {
  if (!t.defined()) return 0;
  int64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return 0;
    last += (t.shape[i] - 1) * t.stride[i];
  }
  return size_t(last + 1) * size_t(dtype_size(t.dtype));
}

Status download(const Tensor& t, std::vector<std::byte>& host, cudaStream_t stream) {
  host.resize(span_bytes(t));
  if (host.empty()) return Status::Ok();
  Status st = cuda_status(cudaMemcpyAsync(host.data(), t.data, host.size(), cudaMemcpyDeviceToHost, stream),
                          "copying an output back");
  return st.ok() ? cuda_status(cudaStreamSynchronize(stream), "copying an output back") : st;
}

// The launch the library makes for `args`, from a stream capture of forward(): the graph (kept in
// out->graph, the caller destroys it) and its one fwd_kernel node, whose parameter list must be the
// one the probed kernel has. Also instantiates the graph for timing the default kernel.
Status capture_launch(const AttnArgs& args, cudaStream_t stream, CapturedLaunch* out, std::string* kernel,
                      cudaGraphExec_t* exec) {
  // Relaxed: the backend's device queries during the call are not stream work and may run.
  Status st = cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  if (!st.ok()) return st;
  const Status fwd = forward(args, stream);
  st = cuda_status(cudaStreamEndCapture(stream, &out->graph), "cudaStreamEndCapture");
  if (!fwd.ok()) st = fwd;
  if (!st.ok()) return st;

  size_t n = 0;
  st = cuda_status(cudaGraphGetNodes(out->graph, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (st.ok() && n > 0) st = cuda_status(cudaGraphGetNodes(out->graph, nodes.data(), &n), "cudaGraphGetNodes");
  if (!st.ok()) return st;
  int kernels = 0;
  for (cudaGraphNode_t nd : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(nd, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel) {
      out->node = nd;
      ++kernels;
    }
  }
  if (kernels != 1)
    return {Code::Internal, "profile: the captured forward made " + std::to_string(kernels) +
                                " kernel launches; the probed replay expects exactly one"};
  cudaKernelNodeParams& kp = out->params;
  st = cuda_status(cudaGraphKernelNodeGetParams(out->node, &kp), "cudaGraphKernelNodeGetParams");
  if (!st.ok()) return st;
  const char* name = nullptr;
  *kernel = cudaFuncGetName(&name, kp.func) == cudaSuccess && name ? name : "?";
  if (kernel->find("fwd_kernel") == std::string::npos)
    return {Code::Internal, "profile: the captured launch is " + *kernel + ", not the sm90 fwd_kernel"};
  // The probed kernel is fwd_kernel(tq, tk, tv, to, p) by value: the captured one must take exactly that.
  const size_t sizes[] = {sizeof(CUtensorMap), sizeof(CUtensorMap), sizeof(CUtensorMap), sizeof(CUtensorMap),
                          sizeof(sm90::FwdParams)};
  constexpr size_t kParams = sizeof(sizes) / sizeof(sizes[0]);
  for (size_t i = 0; i <= kParams; ++i) {
    size_t offset = 0, size = 0;
    const bool has = cudaFuncGetParamInfo(kp.func, i, &offset, &size) == cudaSuccess;
    if (i < kParams && (!has || size != sizes[i]))
      return {Code::Internal, "profile: fwd_kernel parameter " + std::to_string(i) + " is not the probed "
                              "kernel's (signature changed? see src/cuda/prof/probed_run.h)"};
    if (i == kParams && has)
      return {Code::Internal, "profile: fwd_kernel takes more than " + std::to_string(kParams) +
                                  " parameters (see src/cuda/prof/probed_run.h)"};
  }
  cudaGetLastError();  // the query for one parameter too many leaves its error behind
  if (kp.kernelParams == nullptr)
    return {Code::Internal, "profile: the captured launch carries its arguments in 'extra' form, not kernelParams"};
  return cuda_status(cudaGraphInstantiate(exec, out->graph, 0), "cudaGraphInstantiate");
}

// Mean time of the default kernel over `n` replays of its captured graph.
Status time_default(cudaGraphExec_t exec, int n, cudaStream_t stream, double* ms) {
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  Status st = cuda_status(cudaEventCreate(&t0), "cudaEventCreate");
  if (st.ok()) st = cuda_status(cudaEventCreate(&t1), "cudaEventCreate");
  if (st.ok()) st = cuda_status(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");  // warm
  if (st.ok()) st = cuda_status(cudaEventRecord(t0, stream), "cudaEventRecord");
  for (int i = 0; i < n && st.ok(); ++i) st = cuda_status(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  if (st.ok()) st = cuda_status(cudaEventRecord(t1, stream), "cudaEventRecord");
  if (st.ok()) st = cuda_status(cudaEventSynchronize(t1), "default kernel");
  float f = 0;
  if (st.ok()) st = cuda_status(cudaEventElapsedTime(&f, t0, t1), "cudaEventElapsedTime");
  *ms = n > 0 ? f / n : 0;
  if (t0) cudaEventDestroy(t0);
  if (t1) cudaEventDestroy(t1);
  return st;
}

}  // namespace

std::string probed_kernels() {
  std::string list;
#define FASTATTN_PROBED_CASE(DT, CT, HD) \
  list += std::string(list.empty() ? "" : " ") + dtype_name(DT) + "/d" + std::to_string(HD);
#include "cuda/prof/probed_dispatch.inc"
#undef FASTATTN_PROBED_CASE
  return list.empty() ? "none" : list;
}

bool probed_kernel_built(DType dtype, int head_dim) {
#define FASTATTN_PROBED_CASE(DT, CT, HD) \
  if (dtype == DT && head_dim == HD) return true;
#include "cuda/prof/probed_dispatch.inc"
#undef FASTATTN_PROBED_CASE
  return false;
}

Status profile_forward(const AttnArgs& args, const ProfileRequest& request, ProfileResult* result,
                       void* stream_arg) {
  if (Status st = validate_forward(args); !st.ok()) return st;
  if (args.q.device != Device::CUDA || args.backend == Backend::CPU || args.backend == Backend::Reference)
    return Status::Invalid("profile: needs CUDA tensors and the CUDA backend");
  // The probed kernel is the dense one: a call with a score term would be timed without it.
  if (args.bias.defined() || args.alibi_slopes.defined())
    return Status::Unsupported(std::string("profile: the probed kernels take no ") +
                               (args.bias.defined() ? "bias" : "alibi_slopes") + " (time it with fastattn run)");
  const int d = int(args.q.shape[args.q.ndim - 1]);
  if (!probed_kernel_built(args.q.dtype, d))
    return Status::Unsupported(std::string("profile: no probed kernel for ") + dtype_name(args.q.dtype) + " d=" +
                               std::to_string(d) + " in this build (built: " + probed_kernels() +
                               "; see FASTATTN_PROFILE_KERNELS)");
  *result = ProfileResult{};

  // A capture needs a stream other than the legacy default one.
  cudaStream_t own = nullptr, stream = static_cast<cudaStream_t>(stream_arg);
  if (stream == nullptr) {
    if (Status st = cuda_status(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), "cudaStreamCreate"); !st.ok())
      return st;
    stream = own;
  }
  // The probed kernel is the unsplit forward: a split call (num_splits 0 lets the heuristic split a
  // small problem) would add the combine and run the split twin, so the default run, its capture
  // and the probed replays all take num_splits = 1.
  AttnArgs unsplit = args;
  unsplit.num_splits = 1;
  cudaGraphExec_t exec = nullptr;
  Status st = forward(unsplit, stream);  // as the library runs it; also sets its smem attribute outside the capture
  std::vector<std::byte> want_out, want_lse, got;
  if (st.ok()) st = download(args.out, want_out, stream);
  if (st.ok()) st = download(args.lse, want_lse, stream);
  CapturedLaunch launch{};
  if (st.ok()) st = capture_launch(unsplit, stream, &launch, &result->default_kernel, &exec);
  if (st.ok()) {
    const cudaKernelNodeParams& kp = launch.params;
    result->grid[0] = int(kp.gridDim.x), result->grid[1] = int(kp.gridDim.y), result->grid[2] = int(kp.gridDim.z);
    result->block[0] = int(kp.blockDim.x), result->block[1] = int(kp.blockDim.y), result->block[2] = int(kp.blockDim.z);
    result->smem_bytes = kp.sharedMemBytes;
    st = time_default(exec, std::max(1, request.launches), stream, &result->default_ms);
  }
  // Each variant must reproduce the default output bit for bit: the probes change no arithmetic.
  auto run = [&](bool pv_sync, ProbeRun* r) {
    Status s = dispatch(args.q.dtype, d, pv_sync, launch, request, r, result, stream);
    if (s.ok()) s = download(args.out, got, stream);
    bool same = s.ok() && got == want_out;
    if (s.ok()) s = download(args.lse, got, stream);
    r->output_identical = s.ok() && same && got == want_lse;
    return s;
  };
  if (st.ok()) st = run(false, &result->pipeline);
  if (st.ok() && request.pv_sync) st = run(true, &result->pv_sync);
  if (exec) cudaGraphExecDestroy(exec);
  if (launch.graph) cudaGraphDestroy(launch.graph);
  if (own) cudaStreamDestroy(own);
  return st;
}

}  // namespace fastattn::prof
