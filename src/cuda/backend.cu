// CUDA backend entry: device discovery, the CUDA-specific argument checks, and dispatch of the
// forward to the kernel instantiated for (arch, dtype, head dim).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/launch_plan.h"
#include "cuda/sm90/fwd/api.h"

namespace fastattn::cuda_backend {
namespace {

constexpr int kHeadDims[] = {64, 96, 128, 192, 256};

bool head_dim_built(DType dt, int d) {
#ifdef FASTATTN_HAS_SM90
#define FASTATTN_FWD_CASE(DT, CT, HD) \
  if (dt == DT && d == HD) return true;
#include "cuda/sm90/fwd_dispatch.inc"
#undef FASTATTN_FWD_CASE
#endif
  return false;
}

bool aligned16(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int i = 0; i + 1 < t.ndim; ++i)
    if (t.shape[i] > 1 && (t.stride[i] * dtype_size(t.dtype)) % 16 != 0) return false;
  return true;
}

Status device_arch(int& major, int& minor) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return {Code::CudaError, "no CUDA device"};
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return Status::Ok();
}

}  // namespace

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Status check_forward(const AttnArgs& a) {
  if (!available()) return Status::Unsupported("CUDA backend: no CUDA device is present");
  int major = 0, minor = 0;
  if (Status st = device_arch(major, minor); !st.ok()) return st;
  if (major != 9)
    return Status::Unsupported("CUDA forward: kernels are built for Hopper (sm_90a) only; this device is sm_" +
                               std::to_string(major) + std::to_string(minor));
  if (a.q.dtype != DType::F16 && a.q.dtype != DType::BF16)
    return Status::Unsupported(std::string("q: the CUDA forward takes fp16 or bf16, not ") + dtype_name(a.q.dtype) +
                               " (use the CPU backend for fp32)");
  const int d = int(a.q.shape[a.q.ndim - 1]), dv = int(a.v.shape[a.v.ndim - 1]);
  if (d != dv)
    return Status::Unsupported("v: the CUDA forward needs head_dim_v == head_dim (got " + std::to_string(dv) +
                               " and " + std::to_string(d) + ")");
  if (!head_dim_built(a.q.dtype, d)) {
    std::string dims;
    for (int hd : kHeadDims)
      if (head_dim_built(a.q.dtype, hd)) dims += (dims.empty() ? "" : ", ") + std::to_string(hd);
    return Status::Unsupported("q: head_dim " + std::to_string(d) + " is not built for " + dtype_name(a.q.dtype) +
                               " in this CUDA build (built: " + (dims.empty() ? "none" : dims) +
                               "; see FASTATTN_HEAD_DIMS)");
  }
  for (auto [t, name] : {std::pair{&a.q, "q"}, std::pair{&a.k, "k"}, std::pair{&a.v, "v"}})
    if (!aligned16(*t))
      return Status::Unsupported(std::string(name) +
                                 ": the CUDA forward loads with TMA, which needs a 16-byte aligned base pointer "
                                 "and strides that are multiples of 16 bytes");
  if (reinterpret_cast<uintptr_t>(a.out.data) % 4 != 0)
    return Status::Unsupported("out: the CUDA forward needs a 4-byte aligned base pointer");
  for (int i = 0; i + 1 < a.out.ndim; ++i)
    if (a.out.stride[i] % 2 != 0) return Status::Unsupported("out: the CUDA forward needs even strides");
  if (a.mask.kind != MaskKind::None) return Status::Unsupported("mask: the CUDA forward takes no MaskSpec yet");
  // The grid is sized from max_seqlen_q; it cannot be derived without a device-to-host copy.
  if (a.cu_seqlens_q.defined() && (a.max_seqlen_q <= 0 || a.max_seqlen_k <= 0))
    return Status::Invalid(std::string(a.max_seqlen_q <= 0 ? "max_seqlen_q" : "max_seqlen_k") +
                           ": the CUDA forward needs it > 0 for varlen (an upper bound of the sequence lengths)");
  return Status::Ok();
}

Status forward(const detail::Problem& problem, void* stream) {
  const LaunchProblem lp = make_launch_problem(problem);
  const int d = problem.head_dim;
  auto s = static_cast<cudaStream_t>(stream);
#ifdef FASTATTN_HAS_SM90
#define FASTATTN_FWD_CASE(DT, CT, HD) \
  if (problem.dtype == DT && d == HD) return sm90::launch_fwd<CT, HD>(lp, s);
#include "cuda/sm90/fwd_dispatch.inc"
#undef FASTATTN_FWD_CASE
#endif
  (void)s;
  (void)d;
  return Status::Unsupported("CUDA forward: no kernel for this dtype and head dim");
}

const char* build_info() {
  static const std::string info = [] {
    std::string s = "cuda kernels: sm_90a forward";
    int n = 0;
    std::string list;
    for (DType dt : {DType::BF16, DType::F16})
      for (int d : kHeadDims)
        if (head_dim_built(dt, d)) {
          ++n;
          list += std::string(list.empty() ? "" : " ") + dtype_name(dt) + "/d" + std::to_string(d);
        }
    return s + " x" + std::to_string(n) + " [" + list + "]";
  }();
  return info.c_str();
}

}  // namespace fastattn::cuda_backend
