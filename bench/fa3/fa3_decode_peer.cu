// FlashAttention-3's decode path as a peer for bench/decode.py: its forward with GQA packing and,
// when it splits the keys, its split kernel plus its combine kernel, with the split count FA3's own
// heuristic picks (num_splits = 0) or a given one, the way FA3's hopper/flash_api.cpp (mha_fwd)
// runs a fixed-length decode call (q (b, s_q, h, d), k/v (b, s_k, h_k, d), no mask). Built only by
// bench/fa3/build.sh (FA3_PARTS=decode or all) against FA3's public source given by path; nothing
// of FA3 is part of this repository.
//
// Compiled once per variant: FA3_SPLIT 0 or 1 (the forward kernel with PackGQA, d 128, bf16: entry
// fa3_dec_<d>_<dtype>_s<split>), once with FA3_COMBINE (FA3's combine for d_v 128, bf16), and once
// with FA3_DISPATCH: fa3_decode, its workspace size and its heuristic's split count.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "flash.h"

extern "C" {
struct Fa3DecodeArgs {
  const void *q, *k, *v;
  void* out;
  float* lse;         // (b, h, s_q)
  void* workspace;    // fa3_decode_workspace_bytes: FA3's partial O and LSE (split calls only)
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];  // batch, row, head (elements)
  int b, s_q, s_k, h, h_k, d, num_splits, num_sm;  // num_splits 0: FA3's heuristic
  float scale;
};
int fa3_decode(const Fa3DecodeArgs* a, cudaStream_t stream);
int64_t fa3_decode_workspace_bytes(const Fa3DecodeArgs* a);
int fa3_decode_splits(const Fa3DecodeArgs* a);  // the count a call runs with (FA3's heuristic for 0)
const char* fa3_decode_last_error();
}

#if defined(FA3_SPLIT)
#include "flash_fwd_launch_template.h"

#define FA3_DEC_NAME2(s) fa3_dec_128_bf16_s##s
#define FA3_DEC_NAME(s) FA3_DEC_NAME2(s)
extern "C" void FA3_DEC_NAME(FA3_SPLIT)(Flash_fwd_params& params, cudaStream_t stream) {
  // FA3's run_mha_fwd_ for this call: no mask, no softcap, not varlen, no paged KV or append,
  // PackGQA (FA3 packs decode's GQA heads; always when it splits), no cluster (a split forbids it;
  // unsplit, one packed m-block is odd).
  run_flash_fwd<90, 128, 128, 1, cutlass::bfloat16_t, cutlass::bfloat16_t, false, false, false, false, false, false,
                false, /*PackGQA=*/true, /*Split=*/bool(FA3_SPLIT), false>(params, stream);
}

#elif defined(FA3_COMBINE)
#include "flash_fwd_combine_launch_template.h"

extern "C" void fa3_combine_128_bf16(Flash_fwd_params& params, cudaStream_t stream) {
  run_mha_fwd_combine_<cutlass::bfloat16_t, float, 128>(params, stream, /*enable_pdl=*/true);  // as mha_fwd does
}

#else  // the dispatcher

#include <algorithm>  // heuristics.h's std::min({...}) needs it first
#include <string>
#include <tuple>

#include "fa3_dispatch.h"
#include "fa3_fixed_params.h"
#include "heuristics.h"
#include "tile_size.h"

// The varlen scheduler's preparation, referenced (not called) by the fixed-length launch path.
void prepare_varlen_num_blocks(Flash_fwd_params&, cudaStream_t, bool, int, int, bool) {}

extern "C" {
void fa3_dec_128_bf16_s0(Flash_fwd_params&, cudaStream_t);
void fa3_dec_128_bf16_s1(Flash_fwd_params&, cudaStream_t);
void fa3_combine_128_bf16(Flash_fwd_params&, cudaStream_t);
}

namespace {

// FA3's get_num_splits (flash_api.cpp) for this call: fixed length, no mask, arch 90.
int heuristic_splits(const Fa3DecodeArgs* a) {
  const auto mn = tile_size_fwd_sm90(a->d, a->d, false, false, 2, false, false, false);
  const int block_m = std::get<0>(mn), block_n = std::get<1>(mn);
  const int num_n_blocks = (a->s_k + block_n - 1) / block_n;
  const int num_m_blocks = (a->s_q * (a->h / a->h_k) + block_m - 1) / block_m;
  const int size_one_kv_head = a->s_k * (a->d + a->d) * 2;
  return num_splits_heuristic(a->b * a->h_k * num_m_blocks, a->num_sm, num_n_blocks, num_m_blocks, size_one_kv_head,
                              false, 128);
}

int splits_of(const Fa3DecodeArgs* a) { return a->num_splits > 0 ? a->num_splits : heuristic_splits(a); }

}  // namespace

extern "C" const char* fa3_decode_last_error() { return g_error.c_str(); }

extern "C" int fa3_decode_splits(const Fa3DecodeArgs* a) { return splits_of(a); }

// FA3's out_accum (splits, b, h, s_q, d_v) and softmax_lse_accum (splits, b, h, s_q), fp32.
extern "C" int64_t fa3_decode_workspace_bytes(const Fa3DecodeArgs* a) {
  const int64_t s = splits_of(a);
  if (s <= 1) return 0;
  const int64_t rows = int64_t(a->b) * a->h * a->s_q;
  return s * rows * a->d * 4 + s * rows * 4;
}

extern "C" int fa3_decode(const Fa3DecodeArgs* a, cudaStream_t stream) {
  if (a->d != 128) return fail("fa3 decode peer: built for d = 128 only");
  Flash_fwd_params p = fa3_fixed_length_params(a);
  p.is_bf16 = true;
  p.window_size_left = a->s_k - 1;  // FA3's unbounded sides (flash_api.cpp)
  p.window_size_right = a->s_q - 1;
  p.num_splits = splits_of(a);
  p.pack_gqa = true;  // get_pack_gqa: always when split; unsplit decode packs too (should_pack_gqa)
  // Not causal, not varlen: FA3 needs no tile semaphore (flash_api.cpp: scheduler_needs_semaphore).
  if (p.num_splits > 1) {
    const int64_t rows = int64_t(a->b) * a->h * a->s_q;
    p.oaccum_ptr = a->workspace;
    p.softmax_lseaccum_ptr = static_cast<float*>(a->workspace) + int64_t(p.num_splits) * rows * a->d;
    // out_accum (splits, b, h, s_q, d_v), softmax_lse_accum (splits, b, h, s_q): contiguous strides
    p.oaccum_split_stride = rows * a->d;
    p.oaccum_batch_stride = int64_t(a->h) * a->s_q * a->d;
    p.oaccum_head_stride = int64_t(a->s_q) * a->d;
    p.oaccum_row_stride = a->d;
    p.lseaccum_split_stride = rows;
    p.lseaccum_batch_stride = int64_t(a->h) * a->s_q;
    p.lseaccum_head_stride = a->s_q;
    if (int st = launch(fa3_dec_128_bf16_s1, p, stream); st != 0) return st;
    return launch(fa3_combine_128_bf16, p, stream);
  }
  return launch(fa3_dec_128_bf16_s0, p, stream);
}

#endif
