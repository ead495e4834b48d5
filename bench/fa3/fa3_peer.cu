// A C entry point to FlashAttention-3's Hopper forward, so that bench/run-peers.py can time FA3 in
// the same run, the same way and on the same memory as every other peer (issue #3 sets its targets
// from FA3's ratio to cuDNN). Built only by bench/fa3/build.sh against a checkout of FA3's public
// source given by path; no FA3 file is part of this repository or of fastattn's build.
//
// Compiled once per (head dim, V head dim, dtype, mask, cluster) with FA3_D, FA3_DV (default FA3_D),
// FA3_BF16, FA3_CAUSAL, FA3_LOCAL and FA3_CLUSTER defined: each such object holds one FA3 kernel
// (FA3's own build instantiates ~16 variants per head dim behind run-time switches; here only the
// ones the bench's cases take) and one entry, fa3_fwd_<D>_<DV>_<dtype>_<mask>_c<cluster>. FA3 takes
// d_v != d as its own template argument (kHeadDimV; sm90: 192 with 128, 64 with 256 or 512).
// Compiled with FA3_DISPATCH it is the dispatcher,
// fa3_forward, that fills FA3's parameter struct the way FA3's flash_api.cpp does for a fixed-length
// batch and picks the entry.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "flash.h"

extern "C" {
// (b, s, h, d) tensors with contiguous last dims, as fastattn and FA3 take them; strides in elements.
// v and out have d_v columns (q and k d); d_v 0 = d.
struct Fa3Args {
  const void *q, *k, *v;
  void* out;
  float* lse;        // (b, h, s_q), FA3 always writes it
  int* semaphore;    // one int of device memory, zeroed here before each call (FA3 does the same)
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];  // batch, row, head
  int b, s_q, s_k, h, h_k, d, bf16, causal, window_left, window_right, num_sm;
  float scale;
  int d_v;  // last: a library built before it reads the struct as it did (d_v = d)
};
int fa3_forward(const Fa3Args* a, cudaStream_t stream);
const char* fa3_last_error();
}

#define FA3_NAME2(d, dv, t, m, c) fa3_fwd_##d##_##dv##_##t##_##m##_c##c
#define FA3_NAME(d, dv, t, m, c) FA3_NAME2(d, dv, t, m, c)
#ifndef FA3_DV
#define FA3_DV FA3_D
#endif

#ifndef FA3_DISPATCH
#include "flash_fwd_launch_template.h"
#include "fa3_variant.h"

extern "C" void FA3_NAME(FA3_D, FA3_DV, FA3_T, FA3_M, FA3_CLUSTER)(Flash_fwd_params& params, cudaStream_t stream) {
  // Template arguments as FA3's run_mha_fwd_ picks them for a fixed-length, unpaged, unsplit batch
  // with no softcap, no appended KV, no Qv and no GQA packing (the bench's cases).
  run_flash_fwd<90, FA3_D, FA3_DV, FA3_CLUSTER, Fa3Elem, Fa3Elem, bool(FA3_CAUSAL), bool(FA3_LOCAL),
                /*Has_softcap=*/false, /*Varlen=*/false, /*PagedKVNonTMA=*/false, /*AppendKV=*/false,
                /*HasQv=*/false, /*PackGQA=*/false, /*Split=*/false, /*V_colmajor=*/false>(params, stream);
}

#else  // the dispatcher

#include <string>

#include "fa3_dispatch.h"
#include "fa3_fixed_params.h"

// The varlen scheduler's preparation, referenced (not called) by the fixed-length launch path.
void prepare_varlen_num_blocks(Flash_fwd_params&, cudaStream_t, bool, int, int, bool) {}

using Fa3Entry = void (*)(Flash_fwd_params&, cudaStream_t);
// Weak: a library built with FA3_ONLY (build.sh) links a subset of the variants; an entry whose
// object is not in it is null, and a case needing it fails as one never built.
extern "C" {
#define FA3_DECLARE(d, dv, t, m, c) __attribute__((weak)) void FA3_NAME(d, dv, t, m, c)(Flash_fwd_params&, cudaStream_t);
#include "fa3_variants.inc"
#undef FA3_DECLARE
}

namespace {
struct Variant {
  int d, dv, bf16, mask, cluster;  // mask: kFull, kCausal, kLocal
  Fa3Entry fn;
};
const Variant kVariants[] = {
#define FA3_DECLARE(d, dv, t, m, c) {d, dv, #t[0] == 'b', mask_code(#m), c, FA3_NAME(d, dv, t, m, c)},
#include "fa3_variants.inc"
#undef FA3_DECLARE
};
}  // namespace

extern "C" const char* fa3_last_error() { return g_error.c_str(); }

extern "C" int fa3_forward(const Fa3Args* a, cudaStream_t stream) {
  const bool causal = a->causal && a->window_left < 0;
  const bool local = !causal && (a->window_left >= 0 || a->window_right >= 0);
  const int mask = causal ? kCausal : local ? kLocal : kFull;
  const int dv = a->d_v > 0 ? a->d_v : a->d;
  // FA3 pairs two CTAs as a cluster at d >= 128 without a mask when the m-block count is even.
  const int block_m = a->d <= 64 ? 192 : 128;
  const int cluster = a->d >= 128 && mask == kFull && ((a->s_q + block_m - 1) / block_m) % 2 == 0 ? 2 : 1;
  const Variant* v = nullptr;
  for (const Variant& x : kVariants)
    if (x.d == a->d && x.dv == dv && x.bf16 == a->bf16 && x.mask == mask && x.cluster == cluster && x.fn) v = &x;
  if (v == nullptr)
    return fail("fa3 peer: no kernel built for d=" + std::to_string(a->d) + " dv=" + std::to_string(dv) +
                (a->bf16 ? " bf16" : " fp16") +
                " mask=" + std::to_string(mask) + " cluster=" + std::to_string(cluster));

  Flash_fwd_params p = fa3_fixed_length_params(a);
  // FA3 rounds dv up to 64, 96, 128, 192, 256 or 512 when it differs from d (flash_api.cpp's
  // round_up_headdimv); every dv the variant list takes is one of those already.
  p.dv = p.dv_rounded = dv;
  p.is_bf16 = a->bf16 != 0;
  p.is_causal = causal, p.is_local = local;
  // FA3's convention (flash_api.cpp): an unbounded side is s_k - 1 (left) or s_q - 1 (right).
  p.window_size_left = a->window_left >= 0 && !causal ? a->window_left : a->s_k - 1;
  p.window_size_right = causal ? 0 : a->window_right >= 0 ? a->window_right : a->s_q - 1;
  p.num_splits = 1;
  p.tile_count_semaphore = a->semaphore;
  if (cudaMemsetAsync(a->semaphore, 0, sizeof(int), stream) != cudaSuccess)
    return fail(std::string("fa3 peer: ") + cudaGetErrorString(cudaGetLastError()));
  return launch(v->fn, p, stream);
}

#endif
