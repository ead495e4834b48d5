// Host launch of the Hopper backward for one (dtype, head dim): preprocess, main kernel,
// postprocess (not with the dQ ring: dq_ring.h, nor the recompute band: band.h), on one stream. The
// workspace in `p` is allocated and cleared by the caller (bwd_backend.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/common/bwd_params.h"
#include "cuda/bwd_stats_probe.h"
#include "cuda/device_info.h"
#include "cuda/env_switch.h"
#include "cuda/early_launch.h"
#include "cuda/stream_alloc.h"
#include "cuda/sm90/bwd/api.h"
#include "cuda/sm90/bwd/band_kernel.cuh"
#include "cuda/sm90/bwd/bit_lists.h"
#include "cuda/sm90/bwd/block_lists.h"
#include "cuda/sm90/bwd/kernel.cuh"
#include "cuda/sm90/bwd/keys80.cuh"
#include "cuda/sm90/bwd/lpt_order.h"
#include "cuda/sm90/bwd/preprocess.cuh"
#include "cuda/sm90/bwd/wave_tail.h"
#include "cuda/tma_map.h"

namespace fastattn::sm90 {

// Whether d 256, d 192 and 192 / 128 take the 80-key tile where bwd_keys80 allows it.
inline constexpr bool kBwdKeys80On = true;

// The dynamic shared memory of a config's main kernel.
template <class Cfg>
constexpr int bwd_launch_smem_bytes() {
  if constexpr (Cfg::kKeys80)
    return kBwdKeys80SmemBytes<Cfg>;
  else
    return bwd_smem_struct_bytes<Cfg>() + kBwdSmemSlack<Cfg>;
}

// Main kernel and postprocess launch early behind the kernel before them (cuda/early_launch.h): the
// launch gap and their prologue overlap its tail; each waits on the device (grid_dependency_wait)
// before it reads what that kernel wrote. The main kernel launches plainly where no preprocess runs
// ahead of it (what precedes it then is the workspace's clear or the caller's work); the preprocess
// always does (it reads O and dO, which any kernel may have written).
template <class... Params, class... Args>
Status launch_behind(bool early, void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream,
                     Args&&... args) {
  const cudaError_t e = cuda_backend::launch_maybe_early(early, kernel, grid, dim3(unsigned(threads)), size_t(smem),
                                                         stream, std::forward<Args>(args)...);
  if (e != cudaSuccess) return {Code::CudaError, std::string("backward launch: ") + cudaGetErrorString(e)};
  return Status::Ok();
}

// One config (head dim, q-block size) of the three kernels.
template <class T, class Cfg>
Status launch_bwd_config(const detail::Problem& problem, const detail::GradOperands& grads,
                         const cuda_backend::BwdParams& args, cudaStream_t stream) {
  constexpr int D = Cfg::kHeadDim;
  cuda_backend::BwdParams p = args;  // + the key blocks, whose size is the config's
  p.n_blocks = (p.attn.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  // Deterministic CTA order: chunks of 2048 keys, 8 heads' Q, dO in L2 at d 128 s 8k.
  if (p.deterministic) p.det_chunk = std::min(p.n_blocks, Cfg::kDetChunk);
  // Default mode under a right-bounded mask (causal folded in as window_right 0): longest first, in
  // sections of units that fit L2 (d 64: from 16 key blocks, bwd_longest_first); the CTAs walk
  // downwards with the group's heads inner.
  if (Cfg::kLptOrder && !p.deterministic && p.attn.window_right >= 0 && bwd_longest_first(D, p.n_blocks)) {
    p.lpt_section = bwd_lpt_section(p.attn.heads_kv * p.attn.batch, p.attn.q_per_kv, p.attn.seqlen_q, D, kBwdLptL2Bytes);
    p.q_walk_down = Cfg::kKeys80 ? 0 : 1;  // the 80-key kernel walks upwards (keys80.cuh)
    // Causal-like (no left edge): key blocks j and N - 1 - j in one CTA where longest first cannot act
    // (lpt_order.h; the SMs as a persistent grid sees them, so that the tests' FASTATTN_MAX_CTAS
    // sends small problems through the pairs too). The 80-key kernel has no pair tiles: it keeps the
    // sections.
    int sms = 0;
    if (Status st = cuda_backend::persistent_grid(INT32_MAX, &sms); !st.ok()) return st;
    const int units = p.attn.heads_kv * p.attn.batch;
    if (Cfg::kPairKeyBlocks && p.attn.window_left < 0 && bwd_pair_key_blocks(p.lpt_section, units, p.n_blocks, sms)) {
      p.kv_pair = 1;
      p.lpt_section = 0;  // equal CTAs: block order keeps a unit's CTAs together
    }
  }
  // The dQ ring's positions follow the longest-first order that the host planned them with.
  const bool ring = p.dq_ring_slots > 0;
  if (ring && (!Cfg::kHasRingKernel || p.lpt_section != p.ring_section || p.kv_pair))
    return {Code::Internal, "backward: the dQ ring's plan does not match the launch's CTA order"};
  // The recompute band (band_kernel.cuh): bands of band_blocks key blocks, in block order.
  const bool band = p.band_blocks > 0;
  if (band && (!Cfg::kHasRingKernel || ring || p.kv_pair ||
               p.band_count != (p.n_blocks + p.band_blocks - 1) / p.band_blocks))
    return {Code::Internal, "backward: the recompute band's plan does not match the launch"};
  if (p.attn.batch == 0 || p.attn.heads_q == 0) return Status::Ok();
  // The full mask's wave tail (wave_tail.h): equal tiles only (no mask, no varlen or seqused, block order),
  // in a kernel with the piece path (bwd_tail_kernel, bwd_keys80_tail).
  BwdTailPlan tail;
  constexpr long long kTailRunBytes = 16ll * 256 * bwd_tail_run_chunks<Cfg>();  // a piece's dK / dV partial
  // The softcap kernel of its own where the config builds one (else the run-time branch, or none).
  const bool capped =
      Cfg::kSoftcapKernel && bwd_softcap_kernel(D, Cfg::kBlockM, p.deterministic != 0, ring || band, p.attn.softcap);
  bool tail_kernel = false;
  if constexpr (Cfg::kKeys80)
    tail_kernel = bwd_keys80_tail<Cfg>();
  else
    tail_kernel = capped ? bwd_tail_kernel<Cfg, false, false, true>() : bwd_tail_kernel<Cfg, false, false, false>();
  if (tail_kernel && !p.deterministic && !ring && !band && !p.kv_pair && p.lpt_section == 0 && p.attn.window_left < 0 &&
      p.attn.window_right < 0 && !problem.varlen && p.attn.seqused_q == nullptr && p.attn.seqused_k == nullptr &&
      p.m_blocks > 1) {
    int sms = 0;
    if (Status st = cuda_backend::persistent_grid(INT32_MAX, &sms); !st.ok()) return st;
    tail = bwd_tail_choice((long long)p.n_blocks * p.attn.heads_kv * p.attn.batch, sms, p.m_blocks, p.attn.q_per_kv,
                           kTailRunBytes, Cfg::kKeys80 ? kBwdTailMaxBytesKeys80 : kBwdTailMaxBytes);
  }
  auto launched = [](const char* what) -> Status {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return {Code::CudaError, std::string(what) + ": " + cudaGetErrorString(e)};
    return Status::Ok();
  };
  // Block-sparse: the key tiles' lists of kept q-blocks (block_lists.h), built ahead of the preprocess,
  // so that the main kernel, launched early behind the preprocess, finds them written; the workspace is
  // freed behind the postprocess (stream order).
  if constexpr (Cfg::kBias) {
    if (p.deterministic || ring || band)
      return {Code::Internal, "backward: the bias kernel runs the default mode's accumulator path only"};
    // A batch-shared bias: the batch innermost, in block-index order (bias.cuh, bwd_bias_batch_inner_item) and
    // inside longest-first sections (lpt_order.h, bwd_lpt_batch_inner_item) unless FASTATTN_BIAS_BWD_BATCH_INNER
    // is 0 (the batch outermost there, as before session 40); paired key blocks keep the batch outermost.
    p.bias.batch_inner = p.bias.stride_b == 0 && p.attn.batch > 1 && !p.kv_pair &&
                                 (p.lpt_section == 0 || cuda_backend::env_switch("FASTATTN_BIAS_BWD_BATCH_INNER", true))
                             ? 1
                             : 0;
  }
  void* list_ws = nullptr;
  if constexpr (Cfg::kBlockList) {
    if ((p.deterministic && !Cfg::kHasDetKernel) || ring || band || p.kv_pair)
      return {Code::Internal, "backward: the block-sparse kernel runs the accumulator path only (bitmask: either mode)"};
    if constexpr (Cfg::kBitmask) {  // element bitmask: each key tile's own list, partial blocks' bits packed
      if (Status st = prepare_bwd_bit_lists(problem, Cfg::kBlockM, Cfg::kBlockN, stream, &p, &list_ws); !st.ok())
        return st;
    } else {
      if (Status st = prepare_bwd_block_lists(problem, Cfg::kBlockM, Cfg::kBlockN, stream, &p, &list_ws); !st.ok())
        return st;
    }
  }
  // The wave tail's runs and counts (cleared by the preprocess), freed with the lists.
  void* tail_ws = nullptr;
  if (tail.pieces > 1) {
    p.tail_from = tail.tail_from;
    p.tail_pieces = tail.pieces;
    const long long slots = bwd_tail_slots(p);
    if (Status st = cuda_backend::stream_alloc(size_t(slots * tail.pieces * kTailRunBytes + slots * 4), stream,
                                               "backward wave tail", &tail_ws);
        !st.ok())
      return st;
    p.tail_runs = static_cast<float*>(tail_ws);
    p.tail_count = reinterpret_cast<int*>(static_cast<char*>(tail_ws) + slots * tail.pieces * kTailRunBytes);
    if (cuda_backend::BwdStatsProbe* probe = cuda_backend::bwd_stats_probe()) probe->tail_pieces = tail.pieces;
  }
  auto free_lists = [&](Status st) {
    for (void** ws : {&list_ws, &tail_ws}) {
      if (*ws == nullptr) continue;
      const cudaError_t e = cuda_backend::stream_free(*ws, stream);
      *ws = nullptr;
      if (st.ok() && e != cudaSuccess) return Status{Code::CudaError, std::string("backward workspace free: ") + cudaGetErrorString(e)};
    }
    return st;
  };
  const dim3 aux_grid(unsigned(p.m_blocks), unsigned(p.attn.heads_q), unsigned(p.attn.batch));
  if (p.m_blocks > 0) {
    auto preprocess = bwd_preprocess_kernel<T, BwdStatsLayoutOf<Cfg>, false>;
    if constexpr (Cfg::kHasRingKernel) {
      if (ring) preprocess = bwd_preprocess_kernel<T, BwdStatsLayoutOf<Cfg>, true>;
      if (band) preprocess = bwd_band_preprocess_kernel<T, BwdStatsLayoutOf<Cfg>>;
    }
    preprocess<<<aux_grid, kBwdAuxThreads, 0, stream>>>(p);
    if (Status st = launched("backward preprocess launch"); !st.ok()) return free_lists(st);
  }
  const int64_t n_slots = p.det_chunk > 0 ? (p.n_blocks + p.det_chunk - 1) / p.det_chunk * p.det_chunk
                          : p.kv_pair    ? (p.n_blocks + 1) / 2
                          : band         ? p.band_count
                                         : p.n_blocks;
  const int64_t items = n_slots * p.attn.heads_kv * p.attn.batch +
                        (p.tail_pieces > 1 ? int64_t(bwd_tail_slots(p)) * (p.tail_pieces - 1) : 0);
  if (items > 0) {  // also without q rows: it writes dk = dv = 0
    CUtensorMap tq, tk, tv, tdo;
    using cuda_backend::Role;
    using cuda_backend::tma_tensor;
    Status st = cuda_backend::make_tma_map(tma_tensor(problem, Role::Q), Cfg::kBlockM, &tq);
    if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(problem, Role::K), Cfg::kBlockN, &tk);
    if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(problem, Role::V), Cfg::kBlockN, &tv);
    if (st.ok()) st = cuda_backend::make_tma_map(tma_tensor(problem, Role::Out, grads.dout), Cfg::kBlockM, &tdo);
    if (!st.ok()) return free_lists(st);
    auto launch = [&](auto kernel, int smem, cuda_backend::PerDeviceFlags& attr_set) -> Status {
      if (Status st = cuda_backend::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, attr_set);
          !st.ok())
        return st;
      return launch_behind(p.m_blocks > 0, kernel, dim3(unsigned(items)), Cfg::kThreads, smem, stream, tq, tk, tv, tdo, p);
    };
    if (items > INT32_MAX) return free_lists(Status::Unsupported("k: more than 2^31 key blocks x heads x batch"));
    static cuda_backend::PerDeviceFlags det_attr, plain_attr, ring_attr, cap_attr, det_cap_attr, band_attr, zero_q_attr;
    constexpr int kBytes = bwd_launch_smem_bytes<Cfg>();
    static_assert(kBytes <= kBwdSmemMax, "the backward's shared memory exceeds sm_90's 227 KB");
    if constexpr (Cfg::kHasRingKernel) {
      if (ring) st = launch(bwd_kernel<T, Cfg, false, true>, kBytes, ring_attr);
      if (band) st = launch(bwd_band_kernel<T, Cfg>, kBytes, band_attr);
    }
    if constexpr (Cfg::kSoftcapKernel) {
      if (capped && !p.deterministic)
        st = launch(bwd_kernel<T, Cfg, false, false, true>, kBytes, cap_attr);
      else if (capped) {
        if constexpr (Cfg::kDetSoftcapKernel)
          st = launch(bwd_kernel<T, Cfg, true, false, true>, kBytes, det_cap_attr);
        else  // the host rule and the configs disagree: never launch nothing
          return Status::Unsupported("backward: no deterministic softcap kernel for this tile");
      }
    }
    if (!ring && !band && !capped) {
      if constexpr (Cfg::kHasDetKernel) {
        st = p.deterministic ? launch(bwd_kernel<T, Cfg, true>, kBytes, det_attr)
                             : launch(bwd_kernel<T, Cfg, false>, kBytes, plain_attr);
      } else {
        if (p.deterministic) return Status::Unsupported("backward: no deterministic kernel for this tile");
        if constexpr (Cfg::kKeys80) {  // with seqused_q, the twin that zeroes Q / dO past it (keys80.cuh)
          static cuda_backend::PerDeviceFlags tail_attr;
          if (p.attn.seqused_q != nullptr)
            st = launch(bwd_kernel_keys80<T, Cfg, true>, kBytes, zero_q_attr);
          else if (p.tail_pieces > 1) {  // the wave tail's pieces: their kernel of its own
            if constexpr (bwd_keys80_tail<Cfg>())
              st = launch(bwd_kernel_keys80<T, Cfg, false, true>, kBytes, tail_attr);
            else
              return free_lists(Status{Code::Internal, "backward: no wave-tail kernel for this tile"});
          } else
            st = launch(bwd_kernel_keys80<T, Cfg, false>, kBytes, plain_attr);
        }
        else
          st = launch(bwd_kernel<T, Cfg, false>, kBytes, plain_attr);
      }
    }
    if (!st.ok()) return free_lists(st);
    if (st = launched("backward launch"); !st.ok()) return free_lists(st);
  }
  if (p.m_blocks > 0 && !ring && !band) {  // per 64 rows, or per q-block of dQ^T
    const dim3 post_grid(unsigned(p.m_blocks * (Cfg::kDqTransposed ? 1 : Cfg::kBlockM / 64)), unsigned(p.attn.heads_q),
                         unsigned(p.attn.batch));
    if (Status st = launch_behind(true, bwd_postprocess_kernel<T, typename BwdDenseOf<Cfg>::type>, post_grid, kBwdAuxThreads, 0, stream, p); !st.ok())
      return free_lists(st);
    if (Status st = launched("backward postprocess launch"); !st.ok()) return free_lists(st);
  }
  // The lists' free behind the postprocess, not between it and the main kernel: the postprocess launches
  // early behind the main kernel (launch_behind), which a stream operation between them would hold back.
  return free_lists(Status::Ok());
}

#ifdef FASTATTN_BWD_STAMPS
// The stamps of this unit's backward launches (stamps.cuh): zeroed on `stream` before the call to
// read, copied out (kBwdStampWords per CTA, `ctas` CTAs) after it.
template <class T, int D>
cudaError_t clear_bwd_stamps(cudaStream_t stream) {
  void* at = nullptr;
  if (const cudaError_t e = cudaGetSymbolAddress(&at, g_bwd_stamps); e != cudaSuccess) return e;
  return cudaMemsetAsync(at, 0, sizeof(g_bwd_stamps), stream);
}
template <class T, int D>
cudaError_t read_bwd_stamps(unsigned long long* out, int ctas) {
  return cudaMemcpyFromSymbol(out, g_bwd_stamps, sizeof(unsigned long long) * kBwdStampWords * size_t(ctas));
}
#endif

// The config whose q-block size the host chose (BwdParams::block_m: it padded the workspace so). DV != D
// (192 / 128): the d 192 tiles with V / dO / O / dV on d_v (BwdConfig's and BwdConfigKeys80's DV).
template <class T, int D, int DV>
Status launch_bwd(const detail::Problem& problem, const detail::GradOperands& grads, const cuda_backend::BwdParams& p,
                  cudaStream_t stream) {
  // An additive bias (bias.cuh; the host's rule bias_backward_support): the head dim's default tile in the bias
  // kernel (BiasBwdConfig), never the 80-row or 80-key tile, the band or the ring. d 64 has none: its 128-row
  // tile's bias kernel spilled 12 B (notes, "Bias backward").
  if (p.bias.data != nullptr) {
    if constexpr ((D == 96 || D == 128) && DV == D) {
      if (p.block_m != BwdConfig<D>::kBlockM) return Status::Unsupported("backward: no kernel for this q-block size");
      if (p.bias.kind == cuda_backend::kBiasAlibi)
        return launch_bwd_config<T, BiasBwdConfig<BwdConfig<D>, true, true>>(problem, grads, p, stream);
      if (p.bias.kind == cuda_backend::kBiasF32)
        return launch_bwd_config<T, BiasBwdConfig<BwdConfig<D>, true>>(problem, grads, p, stream);
      return launch_bwd_config<T, BiasBwdConfig<BwdConfig<D>, false>>(problem, grads, p, stream);
    } else {
      return Status::Unsupported(p.bias.kind == cuda_backend::kBiasAlibi
                                     ? "alibi_slopes: the CUDA backward with ALiBi runs head dims 96 and 128 (d_v = d)"
                                     : "bias: the CUDA backward with a bias runs head dims 96 and 128 (d_v = d)");
    }
  }
  // The 80-key tile (d 256, d 192, 192 / 128): same q-block (and workspace) as the 64-key kernel's, chosen here by
  // the host rule.
  if constexpr (D == 256 || D == 192) {
    using K80 = BwdConfigKeys80<D, DV>;
    static_assert(K80::kBlockM == BwdConfig<D, BwdConfig<D>::kBlockM, DV>::kBlockM);
    if (kBwdKeys80On && p.block_m == K80::kBlockM &&
        bwd_keys80(D, p.deterministic != 0, p.attn.window_left, p.attn.softcap))
      return launch_bwd_config<T, K80>(problem, grads, p, stream);
  }
  if constexpr (DV != D) {
    using Cfg = BwdConfig<D, BwdConfig<D>::kBlockM, DV>;
    if (p.block_m != Cfg::kBlockM) return Status::Unsupported("backward: no kernel for this q-block size");
    return launch_bwd_config<T, Cfg>(problem, grads, p, stream);
  } else {
    // Block-sparse masks (cuda/block_mask_rule.h: d <= 128, the default mode; bwd_backend.cu routes them to
    // the head dim's default tile, never the 80-row one, the band or the ring).
    // Element bitmasks (the same rule): the block-sparse kernel's bitmask twin.
    if (problem.bits.defined()) {
      if constexpr (D <= 128) {
        if (p.block_m != BwdConfig<D>::kBlockM) return Status::Unsupported("backward: no kernel for this q-block size");
        return launch_bwd_config<T, BitmaskBwdConfig<BwdConfig<D>>>(problem, grads, p, stream);
      } else {
        return Status::Unsupported("mask: the CUDA bitmask backward runs head dims up to 128");
      }
    }
    if (problem.blocks.defined()) {
      if constexpr (D <= 128) {
        if (p.block_m != BwdConfig<D>::kBlockM) return Status::Unsupported("backward: no kernel for this q-block size");
        return launch_bwd_config<T, BlockSparseBwdConfig<BwdConfig<D>>>(problem, grads, p, stream);
      } else {
        return Status::Unsupported("mask: the CUDA block-sparse backward runs head dims up to 128");
      }
    }
    if constexpr (D == 128) {
      if (p.block_m == BwdConfig<128, 80>::kBlockM)
        return launch_bwd_config<T, BwdConfig<128, 80>>(problem, grads, p, stream);
    }
    if (p.block_m != BwdConfig<D>::kBlockM) return Status::Unsupported("backward: no kernel for this q-block size");
    return launch_bwd_config<T, BwdConfig<D>>(problem, grads, p, stream);
  }
}

}  // namespace fastattn::sm90
