// CUDA backend entry: device discovery, the CUDA-specific argument checks, and dispatch of the
// forward to the kernel instantiated for (arch, dtype, head dim).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda/common/fwd_params.h"
#include "cuda/cuda_backend.h"
#include "cuda/sched/gqa_pack.h"
#include "cuda/sm90/fwd_api.h"

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

Status forward(const AttnArgs& a, float scale, void* stream) {
  FwdParams p;
  const bool varlen = a.cu_seqlens_q.defined();
  const int qd = a.q.ndim;  // 4 (b, s, h, d) or 3 (total, h, d)
  p.out = a.out.data;
  p.out_stride_s = a.out.stride[qd - 3];
  p.out_stride_h = a.out.stride[qd - 2];
  p.out_stride_b = varlen ? 0 : a.out.stride[0];
  p.out_vec16 = aligned16(a.out) ? 1 : 0;
  p.heads_q = int(a.q.shape[qd - 2]);
  p.heads_kv = int(a.k.shape[qd - 2]);
  p.q_per_kv = p.heads_q / p.heads_kv;
  if (varlen) {
    p.batch = int(a.cu_seqlens_q.size - 1);
    p.seqlen_q = a.max_seqlen_q;
    p.seqlen_k = a.max_seqlen_k;
    p.cu_seqlens_q = a.cu_seqlens_q.data;
    p.cu_seqlens_k = a.cu_seqlens_k.data;
  } else {
    p.batch = int(a.q.shape[0]);
    p.seqlen_q = int(a.q.shape[1]);
    p.seqlen_k = int(a.k.shape[1]);
  }
  p.seqused_q = a.seqused_q.data;
  p.seqused_k = a.seqused_k.data;
  if (a.lse.defined()) {
    p.lse = static_cast<float*>(a.lse.data);
    if (varlen) {  // (h, total_q)
      p.lse_stride_h = a.lse.stride[0];
      p.lse_stride_s = a.lse.stride[1];
    } else {  // (b, h, s_q)
      p.lse_stride_b = a.lse.stride[0];
      p.lse_stride_h = a.lse.stride[1];
      p.lse_stride_s = a.lse.stride[2];
    }
  }
  constexpr float kLog2e = 1.4426950408889634f;
  if (a.softcap > 0.f) {
    p.softcap = a.softcap;
    p.softcap_in = scale / a.softcap;
    p.scale_log2 = kLog2e;
  } else {
    p.scale_log2 = scale * kLog2e;
  }
  p.window_left = a.window_left;
  p.window_right = a.causal ? 0 : a.window_right;
  // 128-row m-blocks per (batch, q head), or GQA head packing for short queries (sched/gqa_pack.h).
  const int64_t tiles = set_tile_space(p, varlen);
  if (tiles > INT32_MAX) return Status::Unsupported("q: more than 2^31 tiles of 128 rows x heads x batch");
  p.tiles = int(tiles);

  const int d = int(a.q.shape[qd - 1]);
  auto s = static_cast<cudaStream_t>(stream);
#ifdef FASTATTN_HAS_SM90
#define FASTATTN_FWD_CASE(DT, CT, HD) \
  if (a.q.dtype == DT && d == HD) return sm90::launch_fwd<CT, HD>(a, p, s);
#include "cuda/sm90/fwd_dispatch.inc"
#undef FASTATTN_FWD_CASE
#endif
  (void)s;
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
