// The probed Hopper forward and its replay of a captured launch. Included only by the generated
// probed instances, which the profiling target compiles with -DFASTATTN_LOOP_PROBES (and
// -DFASTATTN_PROBE_PV_SYNC for the PV-sync ones).
#pragma once

#ifndef FASTATTN_LOOP_PROBES
#error "probed_launch.cuh is for the profiling build: compile with -DFASTATTN_LOOP_PROBES"
#endif

#include <cuda_runtime.h>

#include <string>

#include "cuda/prof/loop_probes.cuh"
#include "cuda/prof/probed_run.h"
#include "cuda/sm90/fwd/config.h"
#include "cuda/sm90/fwd/kernel.cuh"

namespace fastattn::prof {

// The default tile configuration under another name: the probed kernel is the same template
// instantiated for this type, so its symbol never collides with the library's fwd_kernel<T,
// FwdConfig<D>> (both can live in one program). PvSync separates the two probed variants.
template <int D, bool PvSync>
struct ProbedConfig : sm90::FwdConfig<D> {
  static constexpr bool kProbePvSync = PvSync;
  static constexpr bool kPackedIdle = false;  // beside the probes' registers it spilled 8 bytes (d 128)
};

namespace detail {
inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return {Code::CudaError, std::string("profile: ") + what + ": " + cudaGetErrorString(e)};
}
}  // namespace detail

template <class T, int D, bool PvSync>
Status run_probed(const CapturedLaunch& launch, const ProfileRequest& request, ProbeRun* run,
                  ProfileResult* result, cudaStream_t stream) {
  static_assert(PvSync == kPvSyncBuild, "the PV-sync instances need -DFASTATTN_PROBE_PV_SYNC, the others not");
  using Cfg = ProbedConfig<D, PvSync>;
  using detail::cuda_status;
  const void* kernel = reinterpret_cast<const void*>(&sm90::fwd_kernel<T, Cfg>);
  Status st = cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(launch.params.sharedMemBytes)),
                          "cudaFuncSetAttribute (probed kernel)");
  if (!st.ok()) return st;
  // A copy of the captured graph whose fwd_kernel node runs the probed kernel, same arguments.
  struct Owned {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~Owned() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
    }
  } own;
  cudaGraphNode_t node = nullptr;
  cudaKernelNodeParams params = launch.params;
  params.func = const_cast<void*>(kernel);
  st = cuda_status(cudaGraphClone(&own.graph, launch.graph), "cudaGraphClone");
  if (st.ok()) st = cuda_status(cudaGraphNodeFindInClone(&node, launch.node, own.graph), "cudaGraphNodeFindInClone");
  if (st.ok()) st = cuda_status(cudaGraphKernelNodeSetParams(node, &params), "swapping in the probed kernel");
  if (st.ok()) st = cuda_status(cudaGraphInstantiate(&own.exec, own.graph, 0), "cudaGraphInstantiate (probed)");
  if (!st.ok()) return st;
  auto launch_once = [&] { return cudaGraphLaunch(own.exec, stream); };

  for (int i = 0; i < request.warmup && st.ok(); ++i) st = cuda_status(launch_once(), "probed launch");
  if (!st.ok()) return st;

  ProbeBuffer init{};
  for (int i = 0; i < 3; ++i) init.trace.block[i] = request.trace_block[i];
  init.trace.skip = request.trace_skip;
  init.trace.smid = -1;
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  st = cuda_status(cudaMemcpyToSymbolAsync(g_probe_buffer, &init, sizeof init, 0, cudaMemcpyHostToDevice, stream),
                   "clearing the probe buffer");
  if (st.ok()) st = cuda_status(cudaEventCreate(&t0), "cudaEventCreate");
  if (st.ok()) st = cuda_status(cudaEventCreate(&t1), "cudaEventCreate");
  if (st.ok()) st = cuda_status(cudaEventRecord(t0, stream), "cudaEventRecord");
  for (int i = 0; i < request.launches && st.ok(); ++i) st = cuda_status(launch_once(), "probed launch");
  if (st.ok()) st = cuda_status(cudaEventRecord(t1, stream), "cudaEventRecord");
  if (st.ok())
    st = cuda_status(cudaMemcpyFromSymbolAsync(&run->buffer, g_probe_buffer, sizeof(ProbeBuffer), 0,
                                               cudaMemcpyDeviceToHost, stream),
                     "reading the probe buffer");
  if (st.ok()) st = cuda_status(cudaStreamSynchronize(stream), "probed kernel");
  float ms = 0;
  if (st.ok()) st = cuda_status(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
  if (t0) cudaEventDestroy(t0);
  if (t1) cudaEventDestroy(t1);
  if (!st.ok()) return st;

  const char* name = nullptr;
  run->kernel = cudaFuncGetName(&name, kernel) == cudaSuccess && name ? name : "fwd_kernel (probed)";
  run->ms = request.launches > 0 ? ms / request.launches : 0;
  run->ran = true;
  result->block_m = Cfg::kBlockM;
  result->block_n = Cfg::kBlockN;
  result->head_dim = Cfg::kHeadDim;
  result->ping_pong = Cfg::kPingPong;
  return Status::Ok();
}

}  // namespace fastattn::prof
