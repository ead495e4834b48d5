// fastattn public types: tensors, arguments, masks and status. No CUDA headers here.
#pragma once

#include "fastattn/export.h"
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

namespace fastattn {

enum class DType : int32_t { F16 = 0, BF16 = 1, F32 = 2 };
enum class Device : int32_t { CPU = 0, CUDA = 1 };

// Which implementation runs a call. Auto: the GPU kernels when the tensors live on a CUDA device,
// the CPU backend when they live in host memory. Reference: the float64 naive oracle (slow; tests).
enum class Backend : int32_t { Auto = 0, CPU = 1, CUDA = 2, Reference = 3 };

FASTATTN_API const char* dtype_name(DType dt);
FASTATTN_API int dtype_size(DType dt);

// A strided view of memory, as (pointer, shape, int64 strides in elements, dtype, device).
// The last dimension must have unit stride (like FlashAttention); other strides are free on the CPU
// backend. The CUDA backend loads q, k, v, dout and KV caches with TMA: their other strides (of dims
// longer than 1) must be positive multiples of 16 bytes (a broadcast (stride 0) or reversed (negative)
// view is refused by name; kvcache.h says which cache dims count).
struct Tensor {
  void* data = nullptr;
  int32_t ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int32_t device_index = 0;

  bool defined() const { return data != nullptr; }
  int64_t numel() const;
};

// Contiguous tensor over `data` with the given shape (row-major).
FASTATTN_API Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                Device device = Device::CPU, int32_t device_index = 0);

// A 1-D int32 array (cu_seqlens, seqused); lives where the attention tensors live. A null address means
// "not given" (whatever the size): a caller with an empty array passes a non-null address (never read) to
// have its size checked.
struct IndexArray {
  const int32_t* data = nullptr;
  int64_t size = 0;
  bool defined() const { return data != nullptr; }
};

// Block-sparse mask (MaskKind::BlockSparse): which (block_q x block_k) blocks of each sequence's
// score matrix are kept, as a 4-D byte array `data[mb, mh, qb, kb]` (nonzero = kept; torch.bool
// and uint8 arrays qualify) with element strides (free: any sign, 0 broadcasts a dim):
//   pair (i, j) of batch b and query head h is kept by the blocks when
//       data[b or 0, h / (heads_q / mask_heads), i / block_q, j / block_k] != 0,
//   i and j counted from the start of the sequence (row i of q, key j of k). Dim 0 holds batch
//   entries or 1 (shared); dim 1 (mask_heads) divides heads_q: 1 (every head shares it), heads_kv
//   (one per KV head) or heads_q; dims 2 and 3 cover the longest sequence: at least
//   ceil(max_seqlen_q / block_q) and ceil(max_seqlen_k / block_k) (more is allowed, as FlexAttention's
//   padded masks have). The blocks are ANDed with the sequence lengths and causal / window.
// It lives where the attention tensors live. docs/masks.md has the rules, the CUDA backend's limits
// and the FlexAttention conversion.
struct BlockMask {
  const uint8_t* data = nullptr;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};  // in elements (= bytes)
  Device device = Device::CPU;
  int32_t device_index = 0;
  int32_t block_q = 128;  // FlexAttention's default block
  int32_t block_k = 128;
  bool defined() const { return data != nullptr; }
};

// Element mask (MaskKind::DenseBitmask): a boolean keep-mask of every (query row, key) pair, packed
// as bits of 32-bit words (SDPA's boolean attn_mask, FlexAttention's mask_mod evaluated densely):
//   pair (i, j) of batch b and query head h is kept by the bits when
//       (data[b or 0 : stride 0][h / (heads_q / mask_heads) : stride 1][i : stride 2][j / 32] >> (j % 32)) & 1,
//   i and j counted from the start of the sequence. Dims: (mask_batch 1 or batch, mask_heads dividing
//   heads_q, rows >= the longest seqlen_q, words >= ceil(longest seqlen_k / 32)); the word dim is
//   contiguous, the other strides (in words) are free (any sign, 0 broadcasts). Bits of keys past a
//   sequence's length are ignored. ANDed with the sequence lengths and causal / window. It lives
//   where the attention tensors live. docs/masks.md has the rules and the CUDA backend's limits.
struct BitMask {
  const uint32_t* data = nullptr;
  int64_t shape[4] = {0, 0, 0, 0};  // (mask_batch, mask_heads, rows, words)
  int64_t stride[3] = {0, 0, 0};    // in words, of dims 0-2 (dim 3 has stride 1)
  Device device = Device::CPU;
  int32_t device_index = 0;
  bool defined() const { return data != nullptr; }
};

// Masks beyond seqlen/causal/local. BlockSparse reads `blocks`, DenseBitmask reads `bits`. Bias stays
// reserved and is refused by validation: the additive score bias is AttnArgs::bias, which combines
// with any mask kind (None, DenseBitmask, BlockSparse) and with causal / window.
enum class MaskKind : int32_t { None = 0, DenseBitmask = 1, BlockSparse = 2, Bias = 3 };
struct MaskSpec {
  MaskKind kind = MaskKind::None;
  Tensor data;       // reserved (MaskKind::Bias); the bias is AttnArgs::bias
  BlockMask blocks;  // BlockSparse
  BitMask bits;      // DenseBitmask
};

// Everything one attention call needs.
//
// Fixed-length layout: q (b, s_q, h_q, d), k (b, s_k, h_kv, d), v (b, s_k, h_kv, d_v),
// out (b, s_q, h_q, d_v), lse (b, h_q, s_q) float32.
// Varlen layout (cu_seqlens_q/k given): q (total_q, h_q, d), k/v (total_k, h_kv, d|d_v),
// out (total_q, h_q, d_v), lse (h_q, total_q) float32; cu_seqlens_* hold batch+1 non-decreasing
// offsets starting at 0; seqused_* (optional, batch entries) cap the tokens used per sequence.
//
// Masks, for query row i and key column j of one sequence with lengths (s_q, s_k):
//   the diagonal offset is s_k - s_q ("bottom-right aligned", as FlashAttention 2/3), so
//   causal keeps   j <= i + s_k - s_q;
//   local keeps    i + s_k - s_q - window_left <= j <= i + s_k - s_q + window_right
//                  (a window side of -1 is unbounded; causal is local with window_right = 0).
// A query row that keeps no key gets out = 0 and lse = -inf; rows past seqused_q are such rows
// (and get dq = 0), keys past seqused_k get dk = dv = 0: every output element is written.
struct AttnArgs {
  Tensor q, k, v, out;
  Tensor lse;  // optional for forward (not written if undefined); required for backward

  IndexArray cu_seqlens_q, cu_seqlens_k;  // varlen when defined (both or neither)
  IndexArray seqused_q, seqused_k;        // optional
  // Varlen only: upper bounds of the sequence lengths. 0 is valid: on CUDA it says every sequence
  // of that side is empty (out = 0, lse = -inf, no kernel launched); the CPU and reference
  // backends read the lengths from cu_seqlens and take 0 as "derive it".
  int32_t max_seqlen_q = 0;
  int32_t max_seqlen_k = 0;
  // Varlen on CUDA: copy cu_seqlens/seqused to the host to validate them (one sync).
  // Turn off under CUDA graphs; the caller then vouches for them.
  bool check_index_arrays = true;

  float softmax_scale = std::numeric_limits<float>::quiet_NaN();  // NaN -> 1/sqrt(d)
  bool causal = false;
  int32_t window_left = -1;
  int32_t window_right = -1;
  float softcap = 0.0f;  // 0 = off; else scores become softcap * tanh(scores / softcap)
  MaskSpec mask;

  // Additive score bias (optional; undefined = none). 4-D (bias_batch, bias_heads, rows, cols):
  //   s_ij = softcap(scale * q_i . k_j) + bias[b or 0, h / (heads_q / bias_heads), i, j]
  // (added after softcap, as FlashAttention adds ALiBi; with softcap off this is SDPA's float
  // attn_mask). bias_batch is 1 or batch; bias_heads divides heads_q (1, heads_kv or heads_q);
  // rows >= the longest seqlen_q and cols >= the longest seqlen_k (more is allowed); i and j count
  // from each sequence's start (varlen too). dtype F32, BF16 or F16; the last dim has unit stride,
  // other strides are free on the host backends (0 broadcasts); the CUDA backend needs 16-byte
  // aligned data and row strides and refuses other layouts by name. -inf entries act as a mask (a
  // row whose every kept score is -inf gets out = 0, lse = -inf); NaN propagates. The bias never
  // unmasks: causal / window / block-sparse / bitmask pairs stay masked whatever it holds.
  Tensor bias;
  // Backward's optional output (undefined = not computed; needs `bias`; forward ignores it): the gradient
  // of the pre-softmax score, in bias's logical shape (bias_batch, bias_heads, rows, cols), summed
  // over the batch entries and query heads that share a bias entry; 0 where (i, j) is masked or
  // outside every sequence. F32 only; unit last stride; other strides free but must not overlap.
  Tensor dbias;
  // ALiBi (optional; undefined = none), FlashAttention's `alibi_slopes`: F32, (heads_q) or (batch, heads_q),
  // unit last stride. Adds  -slope[b, h] * |i + s_k - s_q - j|  to s_ij (after softcap, beside any bias),
  // computed in fp32 inside the kernels, with (s_q, s_k) each sequence's used lengths (varlen too). The
  // slopes get no gradient (as in FlashAttention).
  Tensor alibi_slopes;

  Backend backend = Backend::Auto;
  int32_t num_threads = 0;  // CPU backend: 0 = all hardware threads
  // Backward: dq, dk, dv bitwise equal from run to run. The CPU backend always is; the CUDA backend
  // then orders its dQ accumulation (each q-block's adds by key block), at some cost in time.
  bool deterministic = false;
  // Split-KV: each sequence's keys in this many parts whose partial results are merged (same
  // result up to rounding). 0 = chosen per problem: no split on the host backends; on CUDA by the
  // heuristic of docs/notes/inference.md (splits when the unsplit grid leaves SMs idle). At most 1024.
  // The sm80 (Ampere / Ada) path splits only forward_kvcache calls; there other forwards run unsplit.
  int32_t num_splits = 0;
};

enum class Code : int32_t {
  Ok = 0,
  InvalidArgument = 1,
  NotSupported = 2,
  CudaError = 3,
  Internal = 4,
};

// Result of every call. On failure, `message` names the argument and the rule it broke,
// and no output has been touched.
struct Status {
  Code code = Code::Ok;
  std::string message;

  bool ok() const { return code == Code::Ok; }
  static Status Ok() { return {}; }
  static Status Invalid(std::string msg) { return {Code::InvalidArgument, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {Code::NotSupported, std::move(msg)}; }
};

}  // namespace fastattn
