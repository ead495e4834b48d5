/* fastattn C ABI: the C++ API behind plain C types, for bindings and other languages.
 * Every function returns 0 on success or a fastattn_code; fastattn_last_error() then gives the
 * message (thread-local, valid until the next call on the same thread). */
#ifndef FASTATTN_C_API_H
#define FASTATTN_C_API_H

#include "fastattn/export.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The structs below grow by appended fields; a program compiled against an older header passes a
 * shorter struct, which the library would read past. So the binary interface is versioned instead:
 * FASTATTN_ABI_VERSION changes whenever a struct's size or layout does, and a caller checks
 * fastattn_abi_version() == FASTATTN_ABI_VERSION once before its first call (README, "C ABI"). Source
 * compatibility is kept: fields are only appended and fastattn_*_init fills every new one. */
#define FASTATTN_ABI_VERSION 3 /* 1: fastattn_args up to bias / dbias; 2: alibi_slopes appended; 3: \
                                  fastattn_kvcache_args.alibi_slopes appended (fastattn_args as in 2) */

enum fastattn_dtype { FASTATTN_F16 = 0, FASTATTN_BF16 = 1, FASTATTN_F32 = 2 };
enum fastattn_device { FASTATTN_CPU = 0, FASTATTN_CUDA = 1 };
enum fastattn_backend { FASTATTN_AUTO = 0, FASTATTN_BACKEND_CPU = 1, FASTATTN_BACKEND_CUDA = 2,
                        FASTATTN_BACKEND_REFERENCE = 3 };
enum fastattn_code { FASTATTN_OK = 0, FASTATTN_INVALID_ARGUMENT = 1, FASTATTN_NOT_SUPPORTED = 2,
                     FASTATTN_CUDA_ERROR = 3, FASTATTN_INTERNAL = 4 };

typedef struct fastattn_tensor {
  void* data;
  int32_t ndim;
  int64_t shape[4];
  int64_t stride[4]; /* in elements */
  int32_t dtype;     /* enum fastattn_dtype */
  int32_t device;    /* enum fastattn_device */
  int32_t device_index;
} fastattn_tensor;

/* A block-sparse mask (fastattn/types.h BlockMask; docs/masks.md): pair (i, j) of batch b, query
 * head h is kept when data[b or 0, h / (heads_q / shape[1]), i / block_q, j / block_k] != 0 (and
 * the sequence lengths, causal and window keep it). Strides in elements (= bytes), any sign. */
typedef struct fastattn_block_mask {
  const uint8_t* data;               /* NULL: no block mask */
  int64_t shape[4];                  /* (mask_batch, mask_heads, q_blocks, k_blocks) */
  int64_t stride[4];
  int32_t device;                    /* enum fastattn_device: where q lives */
  int32_t device_index;
  int32_t block_q, block_k;          /* fastattn_args_init sets 128, 128 */
} fastattn_block_mask;

/* An element bitmask (fastattn/types.h BitMask; docs/masks.md): pair (i, j) of batch b, query head h
 * is kept when bit j % 32 of word j / 32 of row (b or 0, h / (heads_q / shape[1]), i) is set (and the
 * sequence lengths, causal and window keep it). Strides in 32-bit words (dims 0-2; dim 3 is
 * contiguous), any sign, 0 broadcasts. */
typedef struct fastattn_bit_mask {
  const uint32_t* data;              /* NULL: no bitmask */
  int64_t shape[4];                  /* (mask_batch, mask_heads, rows, words) */
  int64_t stride[3];
  int32_t device;                    /* enum fastattn_device: where q lives */
  int32_t device_index;
} fastattn_bit_mask;

typedef struct fastattn_args {
  fastattn_tensor q, k, v, out, lse; /* lse.data may be NULL in forward */
  const int32_t* cu_seqlens_q;       /* NULL unless varlen */
  const int32_t* cu_seqlens_k;
  int64_t cu_seqlens_size;           /* batch + 1 */
  const int32_t* seqused_q;          /* optional, batch entries */
  const int32_t* seqused_k;
  int32_t max_seqlen_q, max_seqlen_k;
  int32_t check_index_arrays;        /* nonzero: validate cu_seqlens (a sync on CUDA) */
  float softmax_scale;               /* NaN = 1/sqrt(d); fastattn_args_init sets it */
  int32_t causal;
  int32_t window_left, window_right;
  float softcap;
  int32_t backend;                   /* enum fastattn_backend */
  int32_t num_threads;
  int32_t deterministic;             /* nonzero: backward bitwise reproducible (CUDA: ordered dQ adds) */
  int32_t num_splits;                /* split-KV parts; 0 = chosen per problem */
  /* Appended after the fields above (their offsets are unchanged); fastattn_args_init clears it. */
  fastattn_block_mask block_mask;    /* data NULL: no block mask */
  /* Appended after block_mask (every earlier offset unchanged); fastattn_args_init clears it. Not
   * with block_mask: a call takes one mask kind. */
  fastattn_bit_mask bit_mask;        /* data NULL: no element bitmask */
  /* Appended after bit_mask (every earlier offset unchanged); fastattn_args_init clears them. The
   * additive score bias (fastattn::AttnArgs::bias: 4-D (bias_batch, bias_heads, rows, cols), any
   * mask kind) and its gradient, written by fastattn_backward when given (fp32, bias's shape). */
  fastattn_tensor bias;              /* data NULL: no bias */
  fastattn_tensor dbias;             /* data NULL: dbias not computed */
  /* Appended after dbias (ABI 2; every earlier offset unchanged); fastattn_args_init clears it. ALiBi
   * (fastattn::AttnArgs::alibi_slopes): fp32 (heads_q) or (batch, heads_q). */
  fastattn_tensor alibi_slopes;      /* data NULL: no ALiBi */
} fastattn_args;

/* forward_kvcache's arguments (see fastattn/kvcache.h); optional tensors have data NULL. */
typedef struct fastattn_kvcache_args {
  fastattn_tensor q, k_cache, v_cache, k_new, v_new, out, lse, rotary_cos, rotary_sin;
  int64_t batch;                     /* entries of each index array below */
  const int32_t* cache_seqlens;      /* optional */
  const int32_t* cache_batch_idx;    /* optional */
  const int32_t* cache_leftpad;      /* optional */
  const int32_t* page_table;         /* optional: (batch, pages_per_seq) row-major */
  int64_t pages_per_seq;
  int32_t rotary_interleaved;
  float softmax_scale;               /* NaN = 1/sqrt(d) */
  int32_t causal;
  int32_t window_left, window_right;
  float softcap;
  int32_t num_splits;                /* 0 = heuristic */
  void* workspace;                   /* optional (CUDA); see fastattn_kvcache_workspace_bytes */
  uint64_t workspace_bytes;
  int32_t check_index_arrays;
  int32_t backend;
  int32_t num_threads;
  fastattn_tensor alibi_slopes;      /* optional: fp32 (heads_q) or (batch, heads_q); ABI 3 */
} fastattn_kvcache_args;

/* Fills defaults: scale = NaN, windows -1, rotary_interleaved 1, index checks on, backend auto. */
FASTATTN_API void fastattn_kvcache_args_init(fastattn_kvcache_args* args);
FASTATTN_API int fastattn_forward_kvcache(const fastattn_kvcache_args* args, void* stream);
/* Workspace bytes for args on the CUDA backend (0 on the host or for invalid args). */
FASTATTN_API uint64_t fastattn_kvcache_workspace_bytes(const fastattn_kvcache_args* args);

/* Fills defaults: scale = NaN (meaning 1/sqrt(d)), windows -1, no varlen, backend auto, no block
 * mask (block_mask.block_q / block_k 128), no bitmask, no bias. */
FASTATTN_API void fastattn_args_init(fastattn_args* args);

FASTATTN_API int fastattn_forward(const fastattn_args* args, void* stream);
FASTATTN_API int fastattn_backward(const fastattn_args* args, const fastattn_tensor* dout,
                                   const fastattn_tensor* dq, const fastattn_tensor* dk,
                                   const fastattn_tensor* dv, void* stream);
FASTATTN_API const char* fastattn_last_error(void);
FASTATTN_API int fastattn_cuda_available(void);
FASTATTN_API const char* fastattn_version(void);
/* The FASTATTN_ABI_VERSION the library was built with. */
FASTATTN_API int fastattn_abi_version(void);
FASTATTN_API const char* fastattn_build_info(void);

#ifdef __cplusplus
}
#endif
#endif /* FASTATTN_C_API_H */
