// CUDA backend entry: device discovery, the CUDA-specific argument checks, and dispatch of the
// forward to the kernel instantiated for (arch, dtype, head dim).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda/block_mask_rule.h"
#include "cuda/built_kernels.h"
#include "cuda/cuda_backend.h"
#include "cuda/bias_rule.h"
#include "cuda/device_info.h"
#include "cuda/env_switch.h"
#include "cuda/launch_plan.h"
#include "cuda/splitd_rule.h"
#include "cuda/tma_map.h"  // aligned16, tma_tensor
#include "cuda/sm80/fwd/api.h"
#include "cuda/sm90/fwd/api.h"
#include "cuda/sm90/fwd_splitd/api.h"

namespace fastattn::cuda_backend {
namespace {

// The kernels of this build: the kernel menu's rows that the configuration selected (src/cuda/
// sources.cmake generates fwd_dispatch.inc and sm90/bwd_dispatch.inc), one per (family, arch,
// dtype, d, d_v); the split-D forward's rows (fwd_splitd_dispatch.inc) as d = d_v = kSplitDRow: one
// kernel per dtype for every (d, d_v) of splitd_dims.
constexpr int kSplitDRow = -1;
struct BuiltKernel {
  KernelFamily family;
  int major;  // compute capability major the arch runs on
  DType dtype;
  int d, dv;
  const char* arch;
};
constexpr BuiltKernel kBuilt[] = {
#define FASTATTN_FWD_CASE(NS, MAJOR, DT, CT, DQK, DV) {KernelFamily::Forward, MAJOR, DT, DQK, DV, #NS},
#include "cuda/fwd_dispatch.inc"
#undef FASTATTN_FWD_CASE
#define FASTATTN_FWD_SPLITD_CASE(NS, MAJOR, DT, CT) {KernelFamily::Forward, MAJOR, DT, kSplitDRow, kSplitDRow, #NS},
#include "cuda/fwd_splitd_dispatch.inc"
#undef FASTATTN_FWD_SPLITD_CASE
#ifdef FASTATTN_HAS_SM90
#define FASTATTN_BWD_CASE(DT, CT, HD, HDV) {KernelFamily::Backward, 9, DT, HD, HDV, "sm90"},
#include "cuda/sm90/bwd_dispatch.inc"
#undef FASTATTN_BWD_CASE
#endif
#define FASTATTN_BWD80_CASE(DT, CT, HD) {KernelFamily::Backward, 8, DT, HD, HD, "sm80"},
#include "cuda/sm80/bwd_dispatch.inc"
#undef FASTATTN_BWD80_CASE
    {KernelFamily::Forward, 0, DType::F32, 0, 0, nullptr},  // end (the list may be empty)
};

bool arch_built(int major) {
  for (const BuiltKernel& k : kBuilt)
    if (k.arch != nullptr && k.family == KernelFamily::Forward && k.major == major) return true;
  return false;
}

// "sm_XY" of the current device, for messages only (uncached: the error path).
std::string device_sm() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace

Status sm80_limits(const AttnArgs& a) {
  if (a.mask.kind == MaskKind::BlockSparse)
    return Status::Unsupported("mask: block-sparse masks are not built for the sm80 (Ampere / Ada) forward yet");
  if (a.mask.kind == MaskKind::DenseBitmask)
    return Status::Unsupported("mask: element bitmasks are not built for the sm80 (Ampere / Ada) forward yet");
  return Status::Ok();
}

bool kernel_built(KernelFamily family, int major, DType dt, int d, int dv) {
  if (family == KernelFamily::Forward && splitd_dims(d, dv)) d = dv = kSplitDRow;
  for (const BuiltKernel& k : kBuilt)
    if (k.arch != nullptr && k.family == family && k.major == major && k.dtype == dt && k.d == d && k.dv == dv)
      return true;
  return false;
}

std::string built_list(KernelFamily family, int major, DType dt) {
  std::string s;
  for (const BuiltKernel& k : kBuilt)
    if (k.arch != nullptr && k.family == family && k.major == major && k.dtype == dt)
      s += (s.empty() ? "" : ", ") +
           (k.d == kSplitDRow ? std::string(splitd_dims_text())
                              : std::to_string(k.d) + (k.dv != k.d ? "/" + std::to_string(k.dv) : ""));
  return s;
}

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Status check_forward(const AttnArgs& a) {
  // The device's arch from the per-device cache (device_info.h): this runs on every call.
  int major = 0;
  if (Status st = compute_major(&major); !st.ok()) {
    if (!available()) return Status::Unsupported("CUDA backend: no CUDA device is present");
    return st;
  }
  if (!arch_built(major)) {
    std::string archs;
    for (const BuiltKernel& k : kBuilt)
      if (k.arch != nullptr && k.family == KernelFamily::Forward && archs.find(k.arch) == std::string::npos)
        archs += (archs.empty() ? "" : ", ") + std::string(k.arch);
    return Status::Unsupported("CUDA forward: this build has kernels for " + (archs.empty() ? "no arch" : archs) +
                               " only (sm90 = Hopper, sm_90a; sm80 = Ampere / Ada, sm_80 / 86 / 89); this device is " +
                               device_sm());
  }
  if (major == 8) {
    if (Status st = sm80_limits(a); !st.ok()) return st;
  }
  if (a.q.dtype != DType::F16 && a.q.dtype != DType::BF16)
    return Status::Unsupported(std::string("q: the CUDA forward takes fp16 or bf16, not ") + dtype_name(a.q.dtype) +
                               " (use the CPU backend for fp32)");
  const int d = int(a.q.shape[a.q.ndim - 1]), dv = int(a.v.shape[a.v.ndim - 1]);
  if (!kernel_built(KernelFamily::Forward, major, a.q.dtype, d, dv)) {
    const std::string dims = built_list(KernelFamily::Forward, major, a.q.dtype);
    const std::string asked = d == dv ? "q: head_dim " + std::to_string(d)
                                      : "q, v: head_dim " + std::to_string(d) + " with head_dim_v " + std::to_string(dv);
    return Status::Unsupported(asked + " is not built for " + dtype_name(a.q.dtype) + " in this CUDA build (built: " +
                               (dims.empty() ? "none" : dims) +
                               ", as d or d/d_v; see FASTATTN_HEAD_DIMS and the kernel menu in src/cuda/sources.cmake)");
  }
  // The split-D forward (d_qk or d_v above 256) has no block-sparse variant (split-KV: it has).
  if (splitd_dims(d, dv)) {
    const std::string dims = "head_dim " + std::to_string(d) + (dv != d ? "/" + std::to_string(dv) : "");
    if (a.mask.kind == MaskKind::BlockSparse)
      return Status::Unsupported("mask: the CUDA forward at " + dims +
                                 " (the split-D kernel) takes no block-sparse mask (block-sparse: head dims up to 128)");
  }
  for (auto [t, name] : {std::pair{&a.q, "q"}, std::pair{&a.k, "k"}, std::pair{&a.v, "v"}})
    if (!aligned16(tma_tensor(*t)))  // tma_map.cpp's rule: positive 16-byte multiples
      return Status::Unsupported(std::string(name) +
                                 (major == 8 ? ": the CUDA forward (sm80) loads with cp.async 16-byte copies, which need"
                                             : ": the CUDA forward loads with TMA, which needs") +
                                 " a 16-byte aligned base pointer "
                                 "and strides that are positive multiples of 16 bytes (a broadcast (stride 0) or "
                                 "reversed (negative stride) view: pass a contiguous copy)");
  if (reinterpret_cast<uintptr_t>(a.out.data) % 4 != 0)
    return Status::Unsupported("out: the CUDA forward needs a 4-byte aligned base pointer");
  for (int i = 0; i + 1 < a.out.ndim; ++i)
    if (a.out.stride[i] % 2 != 0) return Status::Unsupported("out: the CUDA forward needs even strides");
  // Block-sparse masks: forward() asks block_mask_support on the resolved problem.
  if (a.mask.kind != MaskKind::None && a.mask.kind != MaskKind::BlockSparse && a.mask.kind != MaskKind::DenseBitmask)
    return Status::Unsupported("mask: the CUDA forward takes no MaskSpec but BlockSparse and DenseBitmask yet");
  if (Status st = bias_forward_support(a, major); !st.ok()) return st;
  // The grid is sized from max_seqlen_q; it cannot be derived without a device-to-host copy.
  if (a.cu_seqlens_q.defined() && (a.max_seqlen_q <= 0 || a.max_seqlen_k <= 0))
    return Status::Invalid(std::string(a.max_seqlen_q <= 0 ? "max_seqlen_q" : "max_seqlen_k") +
                           ": the CUDA forward needs it > 0 for varlen (an upper bound of the sequence lengths)");
  return Status::Ok();
}

Status forward(const detail::Problem& problem, void* stream) {
  int major = 0;
  if (Status st = compute_major(&major); !st.ok()) return st;
  const LaunchProblem lp = make_launch_problem(problem);
  const int d = problem.head_dim, dv = problem.head_dim_v;
  auto s = static_cast<cudaStream_t>(stream);
  // The sm80 path's refusals again on the resolved problem (a KV cache's: the kvcache entry's check_forward,
  // before it writes the cache).
  if (major == 8 && problem.blocks.defined())
    return Status::Unsupported("mask: block-sparse masks are not built for the sm80 (Ampere / Ada) forward yet");
  if (major == 8 && problem.bits.defined())
    return Status::Unsupported("mask: element bitmasks are not built for the sm80 (Ampere / Ada) forward yet");
  // An additive bias: the bias twin in each bitmask row's unit (fwd_masked_<dtype>_d<d>.cu holds the
  // masked kernels of every d <= 128 row, so the bitmask rows are the bias rows); bias_rule.h's limits.
  // With a block-sparse mask or a bitmask the mask's launcher below runs its own bias twin.
  if (problem.biased()) {
    if (Status st = bias_problem_support(problem, major); !st.ok()) return st;
  }
  if (problem.biased() && !problem.blocks.defined() && !problem.bits.defined()) {
#define FASTATTN_FWD_BITS_CASE(NS, MAJOR, DT, CT, DQK, DV) \
  if (major == MAJOR && problem.dtype == DT && d == DQK && dv == DV) return NS::launch_fwd_bias<CT, DQK, DV>(lp, s);
#include "cuda/fwd_bitmask_dispatch.inc"
#undef FASTATTN_FWD_BITS_CASE
    return Status::Unsupported(problem.alibi.defined() ? "alibi_slopes: no CUDA forward with ALiBi for this arch, dtype and head dim"
                                                       : "bias: no CUDA forward with bias for this arch, dtype and head dim");
  }
  // A block-sparse mask: the rows that have its kernel (d <= 128, d_v = d; block_mask_rule.h).
  if (problem.blocks.defined()) {
    if (Status st = block_mask_support(problem, /*backward=*/false); !st.ok()) return st;
#define FASTATTN_FWD_BSP_CASE(NS, MAJOR, DT, CT, DQK, DV) \
  if (major == MAJOR && problem.dtype == DT && d == DQK && dv == DV) return NS::launch_fwd_block_sparse<CT, DQK, DV>(lp, s);
#include "cuda/fwd_block_sparse_dispatch.inc"
#undef FASTATTN_FWD_BSP_CASE
    return Status::Unsupported("mask: no block-sparse CUDA forward for this arch, dtype and head dim");
  }
  // An element bitmask: the block-sparse rows' bitmask twins (block_mask_rule.h).
  if (problem.bits.defined()) {
    if (Status st = block_mask_support(problem, /*backward=*/false); !st.ok()) return st;
#define FASTATTN_FWD_BITS_CASE(NS, MAJOR, DT, CT, DQK, DV) \
  if (major == MAJOR && problem.dtype == DT && d == DQK && dv == DV) return NS::launch_fwd_bitmask<CT, DQK, DV>(lp, s);
#include "cuda/fwd_bitmask_dispatch.inc"
#undef FASTATTN_FWD_BITS_CASE
    return Status::Unsupported("mask: no bitmask CUDA forward for this arch, dtype and head dim");
  }
  // Head dims above 256 (splitd_dims): the split-D forward of the dtype, whatever (d, d_v).
  if (splitd_dims(d, dv)) {
#define FASTATTN_FWD_SPLITD_CASE(NS, MAJOR, DT, CT) \
  if (major == MAJOR && problem.dtype == DT) return NS::launch_fwd_splitd<CT>(lp, s);
#include "cuda/fwd_splitd_dispatch.inc"
#undef FASTATTN_FWD_SPLITD_CASE
    return Status::Unsupported("CUDA forward: no split-D kernel for this arch and dtype");
  }
  // By arch, then dtype and head dims: each menu row calls its arch's launcher.
#define FASTATTN_FWD_CASE(NS, MAJOR, DT, CT, DQK, DV) \
  if (major == MAJOR && problem.dtype == DT && d == DQK && dv == DV) return NS::launch_fwd<CT, DQK, DV>(lp, s);
#include "cuda/fwd_dispatch.inc"
#undef FASTATTN_FWD_CASE
  (void)s;
  (void)d;
  (void)dv;
  return Status::Unsupported("CUDA forward: no kernel for this arch, dtype and head dim");
}

const char* build_info() {
  static const std::string info = [] {
    std::string list;
    int n = 0;
    for (const BuiltKernel& k : kBuilt) {
      if (k.arch == nullptr || k.family != KernelFamily::Forward) continue;
      ++n;
      list += std::string(list.empty() ? "" : " ") + k.arch + ":" + dtype_name(k.dtype) +
              (k.d == kSplitDRow ? std::string("/splitd")
                                 : "/d" + std::to_string(k.d) + (k.dv != k.d ? "/dv" + std::to_string(k.dv) : ""));
    }
    return "cuda kernels: forward x" + std::to_string(n) + " [" + list + "]";
  }();
  return info.c_str();
}

}  // namespace fastattn::cuda_backend
