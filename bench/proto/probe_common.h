// What the decode probes of bench/proto share: CUDA error checks, the K / V tensor maps (batch 1, `keys`
// keys, 8 KV heads, d 128 bf16; boxes of 64 columns x `rows` keys of one head, the decode kernels' 128-byte
// swizzle), and the time of a CUDA graph of launches (median replay / launches, as bench/decode.py).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(x)                                                                       \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace probe {

constexpr int kHeadsKv = 8, kDim = 128;

// A (keys, 8 heads, 128) bf16 K or V tensor's map with boxes of `rows` keys.
inline CUtensorMap kv_map(void* data, int keys, int rows) {
  using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static EncodeFn encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    PROBE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    return reinterpret_cast<EncodeFn>(fn);
  }();
  const cuuint64_t dims[4] = {kDim, cuuint64_t(keys), kHeadsKv, 1};
  const cuuint64_t strides[3] = {kHeadsKv * kDim * 2, kDim * 2, cuuint64_t(keys) * kHeadsKv * kDim * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1}, elem[4] = {1, 1, 1, 1};
  CUtensorMap m;
  if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, data, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) !=
      CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    std::exit(1);
  }
  return m;
}

// us a launch: `launch(i)` for i < calls captured in one graph, replayed `replays` times (the median).
template <class Launch>
float graph_us(cudaStream_t stream, int calls, int replays, Launch launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  PROBE_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) launch(i);
  PROBE_CHECK(cudaStreamEndCapture(stream, &g));
  PROBE_CHECK(cudaGraphInstantiate(&ge, g, 0));
  PROBE_CHECK(cudaGraphLaunch(ge, stream));
  PROBE_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t e0, e1;
  PROBE_CHECK(cudaEventCreate(&e0));
  PROBE_CHECK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < replays; ++r) {
    PROBE_CHECK(cudaEventRecord(e0, stream));
    PROBE_CHECK(cudaGraphLaunch(ge, stream));
    PROBE_CHECK(cudaEventRecord(e1, stream));
    PROBE_CHECK(cudaEventSynchronize(e1));
    float ms;
    PROBE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3f / calls);
  }
  PROBE_CHECK(cudaEventDestroy(e0));
  PROBE_CHECK(cudaEventDestroy(e1));
  PROBE_CHECK(cudaGraphExecDestroy(ge));
  PROBE_CHECK(cudaGraphDestroy(g));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace probe
