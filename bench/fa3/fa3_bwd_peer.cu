// A C entry point to FlashAttention-3's Hopper backward, so that bench/run-peers.py --mode backward
// times FA3's dq, dk, dv in the same run and on the same memory as fastattn's (issue #29 sets its
// targets against FA3's backward). Built only by bench/fa3/build.sh against a checkout of FA3's
// public source given by path; no FA3 file is part of this repository or of fastattn's build.
//
// Compiled once per (head dim, dtype, mask, GQA, deterministic) with FA3_D, FA3_BF16, FA3_CAUSAL,
// FA3_LOCAL, FA3_GQA and FA3_DET defined: each such object holds FA3's preprocess, main and
// postprocess kernels for that case and one entry, fa3_bwd_<D>_<dtype>_<mask>_g<gqa>_d<det>.
// Compiled with FA3_DISPATCH it is the dispatcher, fa3_backward, that fills FA3's parameter
// struct the way FA3's flash_api.cpp (mha_bwd) does for a fixed-length batch, lays FA3's scratch
// buffers out in a caller-given workspace and picks the entry.
//
// d_v != d: FA3's sm90 backward has no V head dim of its own. mha_bwd picks the kernel by
// max(d, d_v) and passes d_v only as the extent of V, O, dO and dV, so V and dO come in through
// TMA at the kernel's width (zeros past d_v) and dV is stored d_v wide; the scratch buffers are
// sized at the kernel's width. This dispatcher does the same.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "flash.h"

extern "C" {
// (b, s, h, d) tensors with contiguous last dims; strides in elements (batch, row, head). v, out,
// dout and dv have d_v columns (q, k, dq and dk d); d_v 0 = d.
struct Fa3BwdArgs {
  const void *q, *k, *v, *out, *dout;
  const float* lse;  // (b, h, s_q) natural-log logsumexp of the forward (fastattn's and FA3's layout)
  void *dq, *dk, *dv;
  void* workspace;   // fa3_backward_workspace_bytes(args) bytes of device memory
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3], do_stride[3], dq_stride[3], dk_stride[3],
      dv_stride[3];
  int b, s_q, s_k, h, h_k, d, bf16, causal, window_left, window_right, deterministic, num_sm;
  float scale;
  int d_v;  // last: a library built before it reads the struct as it did (d_v = d)
};
int64_t fa3_backward_workspace_bytes(const Fa3BwdArgs* a);
int fa3_backward(const Fa3BwdArgs* a, cudaStream_t stream);
const char* fa3_bwd_last_error();
}

// FA3's sm90 tile (kBlockM x kBlockN) by head dim, as its run_mha_bwd_hdim* pick it without
// softcap; `masked` = causal or local. The dispatcher sizes the scratch buffers with it.
struct Fa3BwdTile {
  int m, n;
};
constexpr Fa3BwdTile fa3_bwd_tile(int d, bool masked) {
  return d <= 64 ? Fa3BwdTile{128, 128}
       : d <= 96 ? Fa3BwdTile{64, 128}
       : d <= 128 ? Fa3BwdTile{masked ? 64 : 80, 128}
       : d <= 192 ? Fa3BwdTile{64, 96}
                  : Fa3BwdTile{64, 80};
}

#define FA3_BWD_NAME2(d, t, m, g, det) fa3_bwd_##d##_##t##_##m##_g##g##_d##det
#define FA3_BWD_NAME(d, t, m, g, det) FA3_BWD_NAME2(d, t, m, g, det)

#ifndef FA3_DISPATCH
#include "flash_bwd_launch_template.h"
#include "fa3_variant.h"

// The rest of FA3's sm90 configuration per head dim (run_mha_bwd_hdim*, no softcap): pipeline
// stages of dO and dS, which GEMMs swap A and B, MMA warpgroups, atom layouts, V in registers.
template <int D, bool Masked>
struct Fa3BwdConfig;
#define FA3_BWD_CONFIG(D, MASKED, SDO, SDS, SDP_SWAP, DKV_SWAP, DQ_SWAP, WG, ATOM_SDP, ATOM_DKV, ATOM_DQ, V_REGS) \
  template <>                                                                                                 \
  struct Fa3BwdConfig<D, MASKED> {                                                                            \
    static constexpr int stages_do = SDO, stages_ds = SDS, warpgroups = WG;                                   \
    static constexpr bool sdp_swap = SDP_SWAP, dkv_swap = DKV_SWAP, dq_swap = DQ_SWAP, v_in_regs = V_REGS;    \
    static constexpr int atom_sdp = ATOM_SDP, atom_dkv = ATOM_DKV, atom_dq = ATOM_DQ;                         \
  };
FA3_BWD_CONFIG(64, false, 2, 2, true, false, false, 2, 1, 2, 2, false)
FA3_BWD_CONFIG(64, true, 2, 2, true, false, false, 2, 1, 2, 2, false)
FA3_BWD_CONFIG(96, false, 2, 2, true, false, false, 2, 1, 2, 1, true)
FA3_BWD_CONFIG(96, true, 2, 2, true, false, false, 2, 1, 2, 1, true)
FA3_BWD_CONFIG(128, false, 2, 2, true, false, true, 2, 1, 2, 1, false)
FA3_BWD_CONFIG(128, true, 2, 2, true, false, false, 2, 1, 2, 1, false)
FA3_BWD_CONFIG(192, false, 1, 1, false, true, false, 3, 1, 1, 1, false)
FA3_BWD_CONFIG(192, true, 1, 1, false, true, false, 3, 1, 1, 1, false)
FA3_BWD_CONFIG(256, false, 1, 1, false, true, true, 2, 1, 1, 1, false)
FA3_BWD_CONFIG(256, true, 1, 1, false, true, true, 2, 1, 1, 1, false)
#undef FA3_BWD_CONFIG

extern "C" void FA3_BWD_NAME(FA3_D, FA3_T, FA3_M, FA3_GQA, FA3_DET)(Flash_bwd_params& params, cudaStream_t stream) {
  constexpr bool kMasked = FA3_CAUSAL || FA3_LOCAL;
  constexpr Fa3BwdTile kTile = fa3_bwd_tile(FA3_D, kMasked);
  using C = Fa3BwdConfig<FA3_D, kMasked>;
  // As FA3's run_mha_bwd_dispatch for a fixed-length batch without softcap (the bench's cases).
  run_flash_bwd<90, FA3_D, kTile.m, kTile.n, Fa3Elem, bool(FA3_CAUSAL), bool(FA3_LOCAL), /*Has_softcap=*/false,
                /*Varlen=*/false, bool(FA3_DET), bool(FA3_GQA), C::stages_do, C::stages_ds, C::sdp_swap,
                C::dkv_swap, C::dq_swap, C::warpgroups, C::atom_sdp, C::atom_dkv, C::atom_dq, C::v_in_regs>(
      params, stream);
}

#else  // the dispatcher

#include <string>

#include "fa3_dispatch.h"

using Fa3BwdEntry = void (*)(Flash_bwd_params&, cudaStream_t);
// Weak: a library built with FA3_ONLY (build.sh) links a subset of the variants; an entry whose
// object is not in it is null, and a case needing it fails as one never built.
extern "C" {
#define FA3_BWD_DECLARE(d, t, m, g, det) __attribute__((weak)) void FA3_BWD_NAME(d, t, m, g, det)(Flash_bwd_params&, cudaStream_t);
#include "fa3_bwd_variants.inc"
#undef FA3_BWD_DECLARE
}

namespace {
struct Variant {
  int d, bf16, mask, gqa, det;  // mask: kFull, kCausal, kLocal
  Fa3BwdEntry fn;
};
const Variant kVariants[] = {
#define FA3_BWD_DECLARE(d, t, m, g, det) {d, #t[0] == 'b', mask_code(#m), g, det, FA3_BWD_NAME(d, t, m, g, det)},
#include "fa3_bwd_variants.inc"
#undef FA3_BWD_DECLARE
};

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int v_dim(const Fa3BwdArgs* a) { return a->d_v > 0 ? a->d_v : a->d; }
// The kernel's head dim, FA3's head_size_rounded: max(d, d_v) (the variant list's dims are exact).
int kernel_dim(const Fa3BwdArgs* a) { return a->d > v_dim(a) ? a->d : v_dim(a); }

// FA3's mask convention (flash_api.cpp mha_bwd): a side reaching past the sequence is unbounded,
// causal is (unbounded, 0).
struct Mask {
  bool causal, local;
  int left, right;
};
Mask mask_of(const Fa3BwdArgs* a) {
  int left = a->window_left >= a->s_k - 1 ? -1 : a->window_left;
  int right = a->window_right >= a->s_q - 1 ? -1 : a->window_right;
  if (a->causal) right = 0;
  const bool causal = left < 0 && right == 0;
  return {causal, !causal && (left >= 0 || right >= 0), left, right};
}

// FA3's scratch buffers (mha_bwd allocates them per call; here one workspace, 256-byte aligned
// pieces): dO.O row sums and log2 LSE (b, h, s_q rounded), the fp32 dQ accumulator, for GQA the
// fp32 dK/dV accumulators, and the semaphores ordering the deterministic accumulation.
struct Workspace {
  int64_t dsum, lse_log2, dq_accum, dk_accum, dv_accum, dq_sem, dk_sem, dv_sem, bytes;
};
Workspace workspace_of(const Fa3BwdArgs* a) {
  const Mask m = mask_of(a);
  const int64_t d_r = kernel_dim(a);
  const Fa3BwdTile t = fa3_bwd_tile(static_cast<int>(d_r), m.causal || m.local);
  const int64_t sq_r = round_up(a->s_q, t.m), sk_r = round_up(a->s_k, t.n);
  const bool gqa = a->h != a->h_k;
  Workspace w{};
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t here = at;
    at = round_up(at + bytes, 256);
    return here;
  };
  w.dsum = take(4 * a->b * a->h * sq_r);
  w.lse_log2 = take(4 * a->b * a->h * sq_r);
  w.dq_accum = take(4 * a->b * a->h * sq_r * d_r);
  w.dk_accum = gqa ? take(4 * a->b * a->h_k * sk_r * d_r) : -1;
  w.dv_accum = gqa ? take(4 * a->b * a->h_k * sk_r * d_r) : -1;
  w.dq_sem = take(4 * ((a->s_q + t.m - 1) / t.m) * a->b * a->h);
  w.dk_sem = gqa && a->deterministic ? take(4 * ((a->s_k + t.n - 1) / t.n) * a->b * a->h_k) : -1;
  w.dv_sem = gqa && a->deterministic ? take(4 * ((a->s_k + t.n - 1) / t.n) * a->b * a->h_k) : -1;
  w.bytes = at;
  return w;
}
}  // namespace

extern "C" const char* fa3_bwd_last_error() { return g_error.c_str(); }

extern "C" int64_t fa3_backward_workspace_bytes(const Fa3BwdArgs* a) { return workspace_of(a).bytes; }

extern "C" int fa3_backward(const Fa3BwdArgs* a, cudaStream_t stream) {
  const Mask m = mask_of(a);
  const int mask = m.causal ? kCausal : m.local ? kLocal : kFull;
  const int gqa = a->h != a->h_k;
  const int kd = kernel_dim(a);
  if (a->deterministic && kd >= 256) return fail("fa3 peer: FA3 has no deterministic backward at d 256");
  const Variant* v = nullptr;
  for (const Variant& x : kVariants)
    if (x.fn && x.d == kd && x.bf16 == a->bf16 && x.mask == mask && x.gqa == gqa && x.det == (a->deterministic != 0)) v = &x;
  if (v == nullptr)
    return fail("fa3 peer: no backward kernel built for d=" + std::to_string(a->d) + " dv=" + std::to_string(v_dim(a)) +
                (a->bf16 ? " bf16" : " fp16") +
                " mask=" + std::to_string(mask) + " gqa=" + std::to_string(gqa) +
                " deterministic=" + std::to_string(a->deterministic));

  const Fa3BwdTile t = fa3_bwd_tile(kd, m.causal || m.local);
  const Workspace w = workspace_of(a);
  char* ws = static_cast<char*>(a->workspace);
  Flash_bwd_params p;
  std::memset(&p, 0, sizeof(p));
  p.q_ptr = const_cast<void*>(a->q);
  p.k_ptr = const_cast<void*>(a->k);
  p.v_ptr = const_cast<void*>(a->v);
  p.o_ptr = const_cast<void*>(a->out);
  p.do_ptr = const_cast<void*>(a->dout);
  p.dq_ptr = a->dq, p.dk_ptr = a->dk, p.dv_ptr = a->dv;
  p.q_batch_stride = a->q_stride[0], p.q_row_stride = a->q_stride[1], p.q_head_stride = a->q_stride[2];
  p.k_batch_stride = a->k_stride[0], p.k_row_stride = a->k_stride[1], p.k_head_stride = a->k_stride[2];
  p.v_batch_stride = a->v_stride[0], p.v_row_stride = a->v_stride[1], p.v_head_stride = a->v_stride[2];
  p.o_batch_stride = a->o_stride[0], p.o_row_stride = a->o_stride[1], p.o_head_stride = a->o_stride[2];
  p.do_batch_stride = a->do_stride[0], p.do_row_stride = a->do_stride[1], p.do_head_stride = a->do_stride[2];
  p.dq_batch_stride = a->dq_stride[0], p.dq_row_stride = a->dq_stride[1], p.dq_head_stride = a->dq_stride[2];
  p.dk_batch_stride = a->dk_stride[0], p.dk_row_stride = a->dk_stride[1], p.dk_head_stride = a->dk_stride[2];
  p.dv_batch_stride = a->dv_stride[0], p.dv_row_stride = a->dv_stride[1], p.dv_head_stride = a->dv_stride[2];
  p.v_dim_stride = 1;
  p.softmax_lse_ptr = const_cast<float*>(a->lse);
  p.b = p.b_k = a->b;
  p.h = a->h, p.h_k = a->h_k;
  p.seqlen_q = a->s_q, p.seqlen_k = a->s_k;
  p.seqlen_q_rounded = static_cast<int>(round_up(a->s_q, t.m));
  p.seqlen_k_rounded = static_cast<int>(round_up(a->s_k, t.n));
  p.d = a->d, p.dv = v_dim(a);
  p.d_rounded = p.dv_rounded = kd;  // mha_bwd: both at max(d, d_v) rounded
  p.total_q = a->b * a->s_q, p.total_k = a->b * a->s_k;
  p.scale_softmax = a->scale;
  p.p_dropout = 1.f, p.rp_dropout = 1.f, p.p_dropout_in_uint8_t = 255;
  p.is_bf16 = a->bf16 != 0;
  p.is_causal = m.causal, p.is_local = m.local;
  p.window_size_left = m.left < 0 ? a->s_k - 1 : m.left;  // FA3's unbounded sides (set_params_fprop)
  p.window_size_right = m.right < 0 ? a->s_q - 1 : m.right;
  p.arch = 90;
  p.num_sm = a->num_sm;
  p.deterministic = a->deterministic != 0;
  p.dsoftmax_sum = ws + w.dsum;
  p.softmax_lse_log2_ptr = ws + w.lse_log2;
  p.dq_accum_ptr = ws + w.dq_accum;
  p.dq_semaphore = reinterpret_cast<int*>(ws + w.dq_sem);  // the preprocess kernel clears it
  // FA3 allocates these with torch::zeros on every call: the same memsets here.
  auto zero = [&](int64_t off, int64_t bytes) {
    return off < 0 || cudaMemsetAsync(ws + off, 0, bytes, stream) == cudaSuccess;
  };
  const int64_t kv_acc = 4LL * a->b * a->h_k * round_up(a->s_k, t.n) * kd;
  const int64_t kv_sem = 4LL * ((a->s_k + t.n - 1) / t.n) * a->b * a->h_k;
  if (gqa) {
    p.dk_accum_ptr = ws + w.dk_accum;
    p.dv_accum_ptr = ws + w.dv_accum;
    if (a->deterministic) {
      p.dk_semaphore = reinterpret_cast<int*>(ws + w.dk_sem);
      p.dv_semaphore = reinterpret_cast<int*>(ws + w.dv_sem);
    }
  }
  if (!zero(w.dk_accum, kv_acc) || !zero(w.dv_accum, kv_acc) || !zero(w.dk_sem, kv_sem) || !zero(w.dv_sem, kv_sem))
    return fail(std::string("fa3 peer: ") + cudaGetErrorString(cudaGetLastError()));
  return launch(v->fn, p, stream);
}

#endif
