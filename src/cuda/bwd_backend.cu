// CUDA backend, backward: the checks beyond check_forward's, the workspace (stream-ordered), the
// parameters, and the dispatch to the kernels built for (dtype, d_qk, d_v).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/block_mask_rule.h"
#include "cuda/env_switch.h"
#include "cuda/built_kernels.h"
#include "cuda/splitd_rule.h"
#include "cuda/bwd_stats_probe.h"
#include "cuda/common/bwd_params.h"
#include "cuda/common/bwd_seq.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/bias_rule.h"
#include "cuda/device_info.h"
#include "cuda/launch_plan.h"
#include "cuda/sm80/bwd/api.h"
#include "cuda/sm90/bwd/api.h"
#include "cuda/sm90/bwd/band.h"
#include "cuda/sm90/bwd/config.h"  // bwd_block_m
#include "cuda/sm90/bwd/dq_ring.h"
#include "cuda/sm90/bwd/lpt_order.h"
#include "cuda/stream_alloc.h"
#include "cuda/tma_map.h"

namespace fastattn::cuda_backend {
namespace {

// Element pairs stored as one 4-byte word: base and strides (of dims longer than 1) multiples of 4
// bytes, unit last stride.
bool pair_aligned(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 4 != 0) return false;
  for (int i = 0; i + 1 < t.ndim; ++i)
    if (t.shape[i] > 1 && (t.stride[i] * dtype_size(t.dtype)) % 4 != 0) return false;
  return t.stride[t.ndim - 1] == 1;
}

// dq's rows as 4-byte element pairs (the dQ ring stores them so): base and strides even in elements.
bool pairs_aligned(const detail::Operand& o) {
  return reinterpret_cast<uintptr_t>(o.data) % 4 == 0 && o.batch_stride % 2 == 0 && o.token_stride % 2 == 0 &&
         o.head_stride % 2 == 0;
}

// The dQ ring's slot count (sm90/bwd/dq_ring.h; 0: the accumulator path) and the longest-first
// section its positions follow (the launch's: launch.cuh). By default only the windows of
// bwd_ring_by_default take it. FASTATTN_BWD_RING_SLOTS=n > 0 takes it wherever it serves, asking for n
// slots (tests: few, so that the ring wraps and writers wait for their slots); 0 (or not a number)
// turns it off, so that one library serves both sides of an A/B against the accumulator path.
int dq_ring_slots(const AttnParams& a, int d, bool deterministic, const detail::Operand& dq, int m_blocks,
                  int* section) {
  const int units = a.batch * a.heads_kv;
  *section = sm90::bwd_lpt_section(units, a.q_per_kv, a.seqlen_q, d, sm90::kBwdLptL2Bytes);
  int wanted = sm90::kBwdRingSlots;
  if (const char* env = std::getenv("FASTATTN_BWD_RING_SLOTS")) {
    const int n = std::atoi(env);
    if (n <= 0) return 0;
    wanted = n;
  } else if (!sm90::bwd_ring_by_default(a.window_left, a.window_right, a.q_per_kv)) {
    return 0;
  }
  return sm90::bwd_dq_ring_slots(d, deterministic, a.window_left, a.window_right, pairs_aligned(dq), units,
                                 a.q_per_kv, m_blocks, *section, wanted);
}

// The recompute band's key blocks a CTA (sm90/bwd/band.h; 0: not this path, then the dQ ring or the
// accumulator path decide as before). FASTATTN_BWD_BAND: 0 (or not a number) keeps the band off, so
// that one library serves both sides of an A/B; n > 0 asks for bands of n key blocks; unset: the width
// that fills the SMs best (bwd_band_width).
Status band_blocks(const AttnParams& a, int d, const detail::Operand& dq, int* out) {
  *out = 0;
  if (!sm90::bwd_band_serves(d, a.window_left, a.window_right, a.softcap, pairs_aligned(dq)))
    return Status::Ok();
  const int n_blocks = std::max(1, (a.seqlen_k + 127) / 128);
  if (const char* env = std::getenv("FASTATTN_BWD_BAND")) {  // clamped: a band wider than the keys is the whole
    *out = int(std::clamp<long>(std::strtol(env, nullptr, 10), 0, n_blocks));
    return Status::Ok();
  }
  int sms = 0;
  const Status st = sm_count(&sms);
  if (!st.ok()) return st;
  *out = sm90::bwd_band_width(n_blocks, int64_t(a.batch) * a.heads_kv, sms);
  return Status::Ok();
}

// The test hook's buffers (bwd_stats_probe.h): lse_log2 and D poisoned before the kernels.
cudaError_t probe_poison(const BwdParams& p, int64_t rows, cudaStream_t s) {
  const cudaError_t e = cudaMemsetAsync(p.lse_log2, 0xFF, size_t(rows) * 4, s);
  return e != cudaSuccess ? e : cudaMemsetAsync(p.dpsum, 0xFF, size_t(rows) * 4, s);
}

// ... and copied out after them.
cudaError_t probe_copy(BwdStatsProbe& probe, const BwdParams& p, int64_t rows, cudaStream_t s) {
  cudaError_t e = cudaMemcpyAsync(probe.lse_log2, p.lse_log2, size_t(rows) * 4, cudaMemcpyDeviceToDevice, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(probe.dpsum, p.dpsum, size_t(rows) * 4, cudaMemcpyDeviceToDevice, s);
  if (e == cudaSuccess) probe.copied = rows;
  return e;
}

// The forward's messages name the forward; the same rules hold for the backward.
Status renamed(Status st) {
  for (size_t at; (at = st.message.find("CUDA forward")) != std::string::npos;) st.message.replace(at, 12, "CUDA backward");
  return st;
}

BwdStatsProbe* probe_in_force = nullptr;

// The sm80 (Ampere / Ada) backward's limits (sm80/bwd/: d 64 / 128, the default mode, no softcap, no
// mask lists, no bias), by argument name, before the forward's checks (whose sm80 messages name the forward).
Status sm80_backward_limits(const AttnArgs& a) {
  if (a.deterministic)
    return Status::Unsupported("deterministic: the sm80 (Ampere / Ada) backward has no deterministic mode yet (its dQ "
                               "adds come in any order); pass deterministic=False");
  if (a.softcap != 0.f)
    return Status::Unsupported("softcap: the sm80 (Ampere / Ada) backward does not take softcap yet");
  if (a.mask.kind != MaskKind::None)
    return Status::Unsupported("mask: block-sparse masks and element bitmasks are not built for the sm80 (Ampere / "
                               "Ada) backward yet");
  if (a.bias.defined())  // its kernels read no bias: they would return the unbiased gradients
    return Status::Unsupported("bias: the sm80 (Ampere / Ada) backward takes no additive bias yet (sm90 or the CPU "
                               "backend)");
  if (a.alibi_slopes.defined())
    return Status::Unsupported("alibi_slopes: the sm80 (Ampere / Ada) backward takes no ALiBi yet (sm90 or the CPU "
                               "backend)");
  const int d = int(a.q.shape[a.q.ndim - 1]);
  if (d == 128) {  // the d 128 tile's smem (145 KB) fits the A100's and an H100's SM, not sm_86 / sm_89's 100 KB
    int smem = 0;
    if (Status st = smem_per_sm(&smem); !st.ok()) return st;
    constexpr int kReserved = 1024;  // the driver's per-CTA reservation
    if (smem < sm80::bwd_smem_bytes(128) + kReserved)
      return Status::Unsupported("q: head_dim 128: the sm80 backward's tile needs " +
                                 std::to_string(sm80::bwd_smem_bytes(128) / 1024) +
                                 " KB of shared memory a block and this device's SM holds " + std::to_string(smem / 1024) +
                                 " KB (sm_86 / sm_89: the sm80 backward runs d 64 only so far)");
  }
  return Status::Ok();
}

// The bias kernel's fields (common/bwd_bias_params.h) from the resolved bias and dbias.
void set_bias_params(const detail::Problem& problem, const detail::GradOperands& g, BwdParams* p) {
  const detail::BiasView& b = problem.bias;
  BwdBias& out = p->bias;
  if (problem.alibi.defined()) {  // computed in the F32 kernel's seed; the slopes addressed as kBiasAlibi says
    out.data = problem.alibi.data;
    out.kind = kBiasAlibi;
    out.stride_b = problem.alibi.batch_stride;
    out.stride_h = 1;
    out.stride_r = 0;
    out.head_div = 1;
    out.inv_scale = 1.f / problem.scale;
    return;  // no dbias (validation: dbias needs a bias), no pairs, no lean paths
  }
  out.data = b.data;
  out.stride_b = b.batch_stride;
  out.stride_h = b.head_stride;
  out.stride_r = b.row_stride;
  out.head_div = b.head_div;
  out.kind = b.dtype == DType::F32 ? kBiasF32 : b.dtype == DType::BF16 ? kBiasBF16 : kBiasF16;
  out.inv_scale = 1.f / problem.scale;
  out.pairs = b.dtype != DType::F32 && reinterpret_cast<uintptr_t>(b.data) % 4 == 0 && b.batch_stride % 2 == 0 &&
              b.head_stride % 2 == 0 && (b.rows == 1 || b.row_stride % 2 == 0);
  if (g.dbias.defined()) {
    out.grad = static_cast<float*>(g.dbias.data);
    out.grad_stride_b = g.dbias.batch_stride;
    out.grad_stride_h = g.dbias.head_stride;
    out.grad_stride_r = g.dbias.row_stride;
  }
  // The lean paths (BwdBias::lean; sm90/bwd/bias.cuh) unless FASTATTN_BIAS_BWD_LEAN is 0, read per call so that
  // one process measures both. Their 32-bit offsets span 64 rows of a row stride: bounded well below 2^31.
  const bool lean = env_switch("FASTATTN_BIAS_BWD_LEAN", true);
  auto offsets32 = [](int64_t row_stride) { return std::llabs(row_stride) < (int64_t(1) << 24); };
  out.lean = 0;
  if (lean && out.grad != nullptr && reinterpret_cast<uintptr_t>(out.grad) % 8 == 0 && out.grad_stride_b % 2 == 0 &&
      out.grad_stride_h % 2 == 0 && out.grad_stride_r % 2 == 0 && offsets32(out.grad_stride_r))
    out.lean |= kBwdBiasGradPairs;
  // (the staged seed sits in bwd_bias_seed16's paired branch: without pairs the copy would never be awaited)
  if (lean && env_switch("FASTATTN_BIAS_BWD_STAGED", true) && offsets32(out.stride_r) && out.pairs &&
      b.dtype != DType::F32 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0 && out.stride_b % 8 == 0 &&
      out.stride_h % 8 == 0 && out.stride_r % 8 == 0)
    out.lean |= kBwdBiasStaged;
}

// dbias's logical entries to 0: one memset where they are contiguous, else a 2-D one per (batch, head).
// The 2-D memset wants a pitch >= the row's width: a single row takes its width (its stride is any
// number), reversed rows start from the last one (check_dbias made |row stride| >= cols when rows > 1).
cudaError_t clear_dbias(const detail::BiasView& g, cudaStream_t s) {
  const int64_t plane = int64_t(g.rows) * g.cols;
  const bool contiguous = (g.rows == 1 || g.row_stride == g.cols) && (g.heads == 1 || g.head_stride == plane) &&
                          (g.batch == 1 || g.batch_stride == plane * g.heads);
  if (contiguous) return cudaMemsetAsync(g.data, 0, size_t(plane) * g.heads * g.batch * 4, s);
  const int64_t pitch = g.rows == 1 ? g.cols : std::llabs(g.row_stride);
  const int64_t first_row = g.rows > 1 && g.row_stride < 0 ? (g.rows - 1) * g.row_stride : 0;
  for (int b = 0; b < g.batch; ++b)
    for (int h = 0; h < g.heads; ++h) {
      float* at = static_cast<float*>(g.data) + b * g.batch_stride + h * g.head_stride + first_row;
      const cudaError_t e = cudaMemset2DAsync(at, size_t(pitch) * 4, 0, size_t(g.cols) * 4, size_t(g.rows), s);
      if (e != cudaSuccess) return e;
    }
  return cudaSuccess;
}

}  // namespace

BwdStatsProbe* bwd_stats_probe() { return probe_in_force; }
void set_bwd_stats_probe(BwdStatsProbe* probe) { probe_in_force = probe; }

Status check_backward(const AttnArgs& a) {
  // The sm80 path (a major-8 device, or one forced so): its own limits first.
  int device_major = 0;
  const Status major_st = compute_major(&device_major);
  if (major_st.ok() && device_major == 8) {
    if (Status st = sm80_backward_limits(a); !st.ok()) return st;
  }
  if (a.bias.defined() || a.alibi_slopes.defined()) {  // the rule needs the device (sm90 only: sm80 reads no bias)
    if (!major_st.ok()) return major_st;
    if (Status st = bias_backward_support(a, device_major); !st.ok()) return st;
  }
  // The forward's rules without the bias: the backward's bias rule is bias_backward_support's alone.
  AttnArgs unbiased = a;
  unbiased.bias = Tensor{};
  unbiased.dbias = Tensor{};
  unbiased.alibi_slopes = Tensor{};
  if (Status st = check_forward(unbiased); !st.ok()) {
    // check_forward also requires a head dim built for the forward; the backward's list differs.
    if (st.message.find("is not built for") == std::string::npos) return renamed(st);
  }
  // A block-sparse mask: what the backward runs of it is block_mask_support's (validation asks it first).
  const int d = int(a.q.shape[a.q.ndim - 1]), dv = int(a.v.shape[a.v.ndim - 1]);
  int major = 0;
  if (Status st = compute_major(&major); !st.ok()) return st;
  // By (d, d_v): a kernel of d alone would read V, dO and dV d columns wide.
  if (splitd_dims(d, dv))
    return Status::Unsupported("q: head_dim " + std::to_string(d) + (dv != d ? "/" + std::to_string(dv) : "") +
                               ": the CUDA backward takes head dims up to 256 (the forward's split-D kernel, " +
                               splitd_dims_text() + ", has no backward yet)");
  if (!kernel_built(KernelFamily::Backward, major, a.q.dtype, d, dv)) {
    const std::string dims = built_list(KernelFamily::Backward, major, a.q.dtype);
    const std::string asked = d == dv ? "q: head_dim " + std::to_string(d)
                                      : "q, v: head_dim " + std::to_string(d) + " with head_dim_v " + std::to_string(dv);
    return Status::Unsupported(asked + " has no CUDA backward kernel for " + dtype_name(a.q.dtype) +
                               " in this build (built: " + (dims.empty() ? "none" : dims) + "; see FASTATTN_HEAD_DIMS)");
  }
  return Status::Ok();
}

Status check_backward_grads(const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  for (int i = 0; i + 1 < dout.ndim; ++i)
    if (dout.shape[i] > 1 && dout.stride[i] <= 0 && dout.numel() > 0)
      return Status::Unsupported("dout: the CUDA backward loads it with TMA, which cannot read a " +
                                 std::string(dout.stride[i] == 0 ? "broadcast (stride 0)" : "reversed (negative stride)") +
                                 " dim " + std::to_string(i) + "; pass a contiguous dout");
  if (dout.stride[dout.ndim - 1] != 1 || !aligned16(tma_tensor(dout)))
    return Status::Unsupported("dout: the CUDA backward loads it with TMA, which needs a 16-byte aligned base "
                               "pointer, unit last stride and other strides that are multiples of 16 bytes");
  for (auto [t, name] : {std::pair{&dk, "dk"}, std::pair{&dv, "dv"}})
    if (!pair_aligned(*t))
      return Status::Unsupported(std::string(name) +
                                 ": the CUDA backward stores element pairs: it needs a 4-byte aligned base "
                                 "pointer, unit last stride and even strides");
  if (dq.stride[dq.ndim - 1] != 1) return Status::Unsupported("dq: the CUDA backward needs a unit last stride");
  return Status::Ok();
}

Status backward(const detail::Problem& problem, const detail::GradOperands& g, bool deterministic, void* stream) {
  BwdParams p;
  p.attn = make_launch_problem(problem).attn;  // the forward's derivation: sizes, scale, softcap, window
  const int d = problem.head_dim;
  auto strides = [](const detail::Operand& o, int64_t& sb, int64_t& ss, int64_t& sh) {
    sb = o.batch_stride;  // 0 for varlen
    ss = o.token_stride;
    sh = o.head_stride;
  };
  p.dout = g.dout.data;
  p.dq = g.dq.data;
  p.dk = g.dk.data;
  p.dv = g.dv.data;
  strides(g.dout, p.dout_stride_b, p.dout_stride_s, p.dout_stride_h);
  strides(g.dq, p.dq_stride_b, p.dq_stride_s, p.dq_stride_h);
  strides(g.dk, p.dk_stride_b, p.dk_stride_s, p.dk_stride_h);
  strides(g.dv, p.dv_stride_b, p.dv_stride_s, p.dv_stride_h);
  const AttnParams& a = p.attn;
  int major = 0;
  if (Status st = compute_major(&major); !st.ok()) return st;
  const bool ampere = major == 8;  // the sm80 backward: 64-row q-blocks, the accumulator path only
  if (ampere && deterministic)  // a direct caller (check_backward refuses it by name)
    return Status::Unsupported("deterministic: the sm80 (Ampere / Ada) backward has no deterministic mode yet");
  // Likewise what its kernels do not read (sm80_backward_limits): they would run as if it were absent.
  if (ampere && (a.softcap != 0.f || problem.blocks.defined() || problem.bits.defined() || problem.biased()))
    return Status::Unsupported("the sm80 (Ampere / Ada) backward takes no softcap, mask or bias yet "
                               "(sm80_backward_limits)");
  // Rows per q-block, and the workspace's padding per sequence (80 at d 128 without mask: config.h).
  // Block-sparse masks take the head dim's default tile on the accumulator path (never the 80-row tile,
  // the band or the dQ ring: the lists are walked by BlockSparseBwdConfig's kernel only); element bitmasks
  // likewise (its twin, BitmaskBwdConfig).
  const bool block_sparse = problem.blocks.defined() || problem.bits.defined();
  if (block_sparse) {  // validation asked the rule with the mode; a direct caller is held to it here
    if (Status st = block_mask_support(problem, true, deterministic); !st.ok()) return st;
  }
  // An additive bias likewise (BiasBwdConfig's kernel; bias_backward_support held the call to its rule).
  const bool bias = problem.biased();  // ALiBi too: the bias kernel, its term computed
  if (bias && (ampere || block_sparse || a.softcap != 0.f || deterministic))  // a direct caller: the rule too
    return Status::Unsupported(std::string(problem.alibi.defined() ? "alibi_slopes: the CUDA backward with ALiBi"
                                                                   : "bias: the CUDA backward with a bias") +
                               " runs on sm90 in the default mode without softcap or a block mask (bias_backward_support)");
  if (bias) set_bias_params(problem, g, &p);
  const int bm = ampere ? sm80::kBwdBlockM
                        : sm90::bwd_block_m(d, !block_sparse && !bias &&
                                                   sm90::bwd_rows80(d, deterministic, a.window_left,
                                                                    a.window_right, a.softcap));
  p.block_m = bm;
  p.m_blocks = (a.seqlen_q + bm - 1) / bm;
  p.padded_rows = problem.varlen ? (problem.total_q + bm * int64_t(a.batch) + bm - 1) / bm * bm
                                 : padded_q_offset(0, a.batch, false, a.seqlen_q, bm);
  p.scale = problem.scale;
  if (a.softcap > 0.f) p.tanh_of_log2 = 1.f / (a.softcap * a.scale_log2);
  p.deterministic = deterministic ? 1 : 0;

  if (bm == 64 && !block_sparse && !bias && !ampere) {
    const Status st = band_blocks(a, d, g.dq, &p.band_blocks);
    if (!st.ok()) return st;
  }
  const bool band = p.band_blocks > 0;
  // The band is deterministic as it stands (band.h): the deterministic mode's ordered adds, semaphores
  // and ticket are not needed.
  if (band) p.deterministic = 0;
  if (band) {  // key blocks of 128 (the d 128 tile; launch.cuh checks the count against its n_blocks)
    const int n_blocks = (a.seqlen_k + 127) / 128;
    p.band_count = (n_blocks + p.band_blocks - 1) / p.band_blocks;
  } else if (!block_sparse && !bias && !ampere) {
    p.dq_ring_slots = dq_ring_slots(a, d, deterministic, g.dq, p.m_blocks, &p.ring_section);
  }

  // Workspace: dQ accumulator (or the dQ ring), lse_log2, D (per q head and padded row), semaphores
  // (or the ring's counts) and the ticket. The preprocess clears each q-block's accumulator run, or
  // the ring and its counts and the ticket (no memset of them here).
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t rows = int64_t(a.heads_q) * p.padded_rows;
  const bool ring = p.dq_ring_slots > 0;
  const int64_t positions =
      ring ? sm90::bwd_ring_positions(a.batch * a.heads_kv, a.q_per_kv, p.m_blocks, p.ring_section) : 0;
  const int64_t sems = p.deterministic ? int64_t(a.batch) * a.heads_q * p.m_blocks + 1 : ring ? 2 * positions + 1 : 0;
  // The band: no accumulator, only the GQA slots of held partial dQ past the kernel's two in smem.
  const size_t band_spill_bytes = band ? size_t(p.band_count) * a.batch * a.heads_kv *
                                             sm90::bwd_band_spill_slots(a.q_per_kv) * bm * d * 4
                                       : 0;
  const size_t accum_bytes = ring   ? size_t(sm90::bwd_ring_slots_held(p.dq_ring_slots, positions)) * bm * d * 4
                             : band ? band_spill_bytes
                                    : size_t(rows) * d * 4;
  const size_t scalar_bytes = size_t(rows) * 4;
  const size_t bytes = accum_bytes + 2 * scalar_bytes + size_t(sems) * 4;
  void* ws = nullptr;
  BwdStatsProbe* const probe = bwd_stats_probe();
  if (probe != nullptr) {
    probe->copied = 0;
    probe->padded_rows = p.padded_rows;
    probe->block_m = p.block_m;
    probe->ring = ring;
    probe->band = band;
    probe->tail_pieces = 0;  // the launch sets it where it splits (sm90/bwd/launch.cuh)
    if (probe->capacity < rows)  // before any work: the caller's buffers cannot take the copy
      return {Code::InvalidArgument, "backward stats probe: buffers of " + std::to_string(probe->capacity) +
                                         " floats, the workspace's stats need " + std::to_string(rows)};
  }
  if (bytes > 0) {
    if (Status st = stream_alloc(bytes, s, "backward workspace", &ws); !st.ok()) return st;
    cudaError_t e = cudaSuccess;
    char* base = static_cast<char*>(ws);
    if (band)
      p.band_spill = band_spill_bytes > 0 ? reinterpret_cast<float*>(base) : nullptr;
    else
      (ring ? p.dq_ring : p.dq_accum) = reinterpret_cast<float*>(base);
    p.lse_log2 = reinterpret_cast<float*>(base + accum_bytes);
    p.dpsum = reinterpret_cast<float*>(base + accum_bytes + scalar_bytes);
    if (ring) {
      p.dq_ring_need = reinterpret_cast<int*>(base + accum_bytes + 2 * scalar_bytes);
      p.dq_ring_count = p.dq_ring_need + positions;
      p.tile_ticket = p.dq_ring_count + positions;
    } else if (sems > 0) {
      p.dq_sem = reinterpret_cast<int*>(base + accum_bytes + 2 * scalar_bytes);
      p.tile_ticket = p.dq_sem + (sems - 1);
      e = cudaMemsetAsync(p.dq_sem, 0, size_t(sems) * 4, s);
    }
    if (e == cudaSuccess && probe != nullptr) e = probe_poison(p, rows, s);
    if (e != cudaSuccess) {
      stream_free(ws, s);
      return {Code::CudaError, std::string("backward workspace clear: ") + cudaGetErrorString(e)};
    }
  }
  if (g.dbias.defined()) {  // entries that no step adds into stay 0 (masked, past every sequence)
    if (const cudaError_t e = clear_dbias(g.dbias, s); e != cudaSuccess) {
      if (ws != nullptr) stream_free(ws, s);
      return {Code::CudaError, std::string("backward dbias clear: ") + cudaGetErrorString(e)};
    }
  }
  Status st = Status::Unsupported("CUDA backward: no kernel for this dtype and head dims");
  if (ampere) {
#define FASTATTN_BWD80_CASE(DT, CT, HD) \
  if (problem.dtype == DT && d == HD && problem.head_dim_v == HD) st = sm80::launch_bwd<CT, HD>(problem, g, p, s);
#include "cuda/sm80/bwd_dispatch.inc"
#undef FASTATTN_BWD80_CASE
  } else {
#ifdef FASTATTN_HAS_SM90
#define FASTATTN_BWD_CASE(DT, CT, HD, HDV) \
  if (problem.dtype == DT && d == HD && problem.head_dim_v == HDV) st = sm90::launch_bwd<CT, HD, HDV>(problem, g, p, s);
#include "cuda/sm90/bwd_dispatch.inc"
#undef FASTATTN_BWD_CASE
#endif
  }
  if (st.ok() && probe != nullptr && ws != nullptr) {
    if (const cudaError_t e = probe_copy(*probe, p, rows, s); e != cudaSuccess)
      st = {Code::CudaError, std::string("backward stats probe copy: ") + cudaGetErrorString(e)};
  }
  if (ws != nullptr) {
    const cudaError_t e = stream_free(ws, s);
    if (st.ok() && e != cudaSuccess) return {Code::CudaError, std::string("backward workspace free: ") + cudaGetErrorString(e)};
  }
  return st;
}

}  // namespace fastattn::cuda_backend
