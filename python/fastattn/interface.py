"""FlashAttention-3-compatible entry points (flash_attn_interface): (batch, seqlen, heads, dim).

Masks are bottom-right aligned when seqlen_q != seqlen_k, as in FlashAttention 2/3: query row i
of a sequence keeps key j when i + s_k - s_q - window_left <= j <= i + s_k - s_q + window_right
(a side of -1 is unbounded; causal=True is window_right = 0).
block_mask= adds a block-sparse mask on top (docs/masks.md): pair (i, j) of batch b, query head h is
kept only when block_mask[b or 0, h // (heads_q // mask_heads), i // block_q, j // block_k] is
true, block_size = (block_q, block_k) (default (128, 128)); a torch FlexAttention BlockMask is
taken when its kept blocks need no mask_mod.
"""
from __future__ import annotations

import operator

from . import _bias, _bit_mask, _block_mask, _core, _fa_compat
from ._arrays import arrays_for, same_kind, torch_module
from ._ints import int_arg


_NO_INDEX = _core.NO_INDEX
_INDEX_NAMES = ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k")


def _torch_fwd(q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size, softcap,
               deterministic, direct, block_mask=None, block_size=_block_mask.DEFAULT_BLOCK_SIZE, bit_mask=None,
               bias=None, alibi_slopes=None):
    """(out, lse) through the fastattn::fwd custom op (torch.compile, tensor subclasses), or its
    autograd twin without the op's dispatch when direct (plain tensors, eager). bit_mask: packed
    element-mask words (_bit_mask.pack, int32 on q's device) or None; autograd saves it for the backward.
    bias: a 4-D additive bias (_bias.bias_4d) or None; its gradient flows when it requires grad.
    alibi_slopes: float32 ALiBi slopes or None; saved for the backward, given no gradient."""
    import torch

    max_seqlens = [m if isinstance(m, (int, torch.SymInt)) else operator.index(m) for m in max_seqlens]
    left, right = _core.window_pair(window_size)
    scale = _core.resolve_scale(softmax_scale, q.shape[-1])
    if direct:
        from ._torch_ops import DirectAttention

        return DirectAttention.apply(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal), left,
                                     right, float(softcap), bool(deterministic), block_mask, *block_size, bit_mask,
                                     bias, alibi_slopes)
    if alibi_slopes is not None:  # the op's last argument: every one before it given
        return torch.ops.fastattn.fwd(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal), left, right,
                                      float(softcap), bool(deterministic), block_mask, *block_size, bit_mask, bias,
                                      alibi_slopes)
    if bias is not None:
        return torch.ops.fastattn.fwd(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal), left, right,
                                      float(softcap), bool(deterministic), block_mask, *block_size, bit_mask, bias)
    if bit_mask is not None:
        return torch.ops.fastattn.fwd(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal), left, right,
                                      float(softcap), bool(deterministic), block_mask, *block_size, bit_mask)
    if block_mask is None:  # the op's schema defaults: the same graph as before block masks existed
        return torch.ops.fastattn.fwd(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal),
                                      left, right, float(softcap), bool(deterministic))
    return torch.ops.fastattn.fwd(q, k, v, *index_arrays, *max_seqlens, scale, bool(causal),
                                  left, right, float(softcap), bool(deterministic), block_mask, *block_size)


def attention(q, k, v, index_arrays=_NO_INDEX, max_seqlens=(0, 0), *, softmax_scale=None,
              causal=False, window_size=(-1, -1), softcap=0.0, deterministic=False, with_lse=True,
              heads_first=False, block_mask=None, block_size=_block_mask.DEFAULT_BLOCK_SIZE, mask=None, bias=None,
              alibi_slopes=None):
    """(out, lse) for any array kind; torch tensors are differentiable (the backward deterministic
    when asked), through the custom op or, for plain tensors in eager mode, without it. Other
    arrays have no autograd: deterministic is then unused (fastattn.backward takes it).
    with_lse=False may return lse None (the torch direct path then skips allocating it).
    heads_first: fixed-length q, k, v given as (b, h, s, d) (SDPA's layout; the caller checked
    their ranks); out is (b, s_q, h, d_v) all the same. The torch direct path reads them as they
    lie, without a transpose call.
    block_mask / block_size: as flash_attn_func (the mask is an array of q's kind).
    mask: a bool keep-mask of every pair (flash_attn_func), packed into bitmask words on its device;
    torch calls with it are differentiable too (the op and its autograd twin save the packed words).
    bias: an additive score bias (flash_attn_func); torch autograd gives it a gradient when it requires one.
    alibi_slopes: FlashAttention's ALiBi slopes (flash_attn_func); no gradient."""
    if block_mask is not None:
        block_mask, block_size = _block_mask.resolve(block_mask, block_size)
    else:  # the paths below unpack block_size as a pair; without a mask it applies to nothing
        block_size = _block_mask.DEFAULT_BLOCK_SIZE
    if heads_first and any(x is not None for x in index_arrays):  # no `is` on tuples: Dynamo traces this
        raise ValueError("heads_first: fixed-length attention only (no cu_seqlens / seqused)")
    if index_arrays[0] is not None or index_arrays[1] is not None:
        _core.check_cu_seqlens(index_arrays[0], index_arrays[1])
    torch = torch_module()
    if mask is not None or bias is not None or alibi_slopes is not None:
        return _masked_attention(torch, q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size,
                                 softcap, heads_first, block_mask, block_size, mask, deterministic, bias, alibi_slopes)
    if torch is not None and isinstance(q, torch.Tensor):
        path = _torch_path(torch, q, k, v)
        # isinstance, not the array adapters: Dynamo traces it (the op path runs under torch.compile).
        # The inference path has seen k and v to be plain tensors (_torch_path).
        if path != "inference" or block_mask is not None:
            for name, x in (("k", k), ("v", v), ("block_mask", block_mask)):
                if x is not None and not isinstance(x, torch.Tensor):
                    raise TypeError(f"{name}: expected a torch array like q, got {type(x).__name__}")
        # The identity shortcut only outside tracing: Dynamo (torch 2.11) cannot trace `is` on tuples.
        if path == "op" or index_arrays is not _NO_INDEX:
            for name, x in zip(_INDEX_NAMES, index_arrays):
                if x is not None and not isinstance(x, torch.Tensor):
                    raise TypeError(f"{name}: expected a torch tensor like q, got {type(x).__name__}")
        if path == "inference":
            blocks = None if block_mask is None else (block_mask, *block_size)
            return _eager_inference_forward(q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size,
                                            softcap, with_lse, heads_first, blocks)
        _check_ranks(q, k, v, index_arrays[0] is not None or index_arrays[1] is not None)
        if heads_first:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return _torch_fwd(q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size,
                          softcap, deterministic, path == "autograd", block_mask, block_size)
    xs = arrays_for(q, "q")
    same_kind(xs, [("k", k), ("v", v), ("block_mask", block_mask)] + list(zip(_INDEX_NAMES, index_arrays)))
    varlen = index_arrays[0] is not None or index_arrays[1] is not None
    for name, x in (("q", q), ("k", k), ("v", v)):
        _core.check_rank(x, name, varlen)
    if heads_first:
        q, k, v = xs.swap12(q), xs.swap12(k), xs.swap12(v)
    left, right = _core.window_pair(window_size)
    scale = _core.resolve_scale(softmax_scale, q.shape[-1])
    return _core.run_forward(xs, q, k, v, index_arrays, operator.index(max_seqlens[0]),
                             operator.index(max_seqlens[1]), scale, bool(causal), left, right,
                             float(softcap), check_index_arrays=True, block_mask=block_mask,
                             block_size=block_size)


def _check_ranks(q, k, v, varlen):
    rank = 3 if varlen else 4
    if q.dim() != rank or k.dim() != rank or v.dim() != rank:
        for name, x in (("q", q), ("k", k), ("v", v)):
            _core.check_rank(x, name, varlen)


def _eager_inference_forward(q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size, softcap,
                             with_lse, heads_first=False, blocks=None):
    """(out, lse or None) of plain torch tensors that need neither autograd nor tracing (_torch_path's
    "inference"): the extension called directly on their views."""
    _check_ranks(q, k, v, index_arrays[0] is not None or index_arrays[1] is not None)
    left, right = _core.window_pair(window_size)
    scale = _core.resolve_scale(softmax_scale, q.shape[-1])
    return _torch_views().forward(q, k, v, index_arrays, operator.index(max_seqlens[0]),
                                  operator.index(max_seqlens[1]), scale, bool(causal), left,
                                  right, float(softcap), not q.is_cuda, with_lse, heads_first, blocks)


def _masked_attention(torch, q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size, softcap,
                      heads_first, block_mask, block_size, mask, deterministic=False, bias=None, alibi_slopes=None):
    """attention() with an element mask (packed into bitmask words on its device), an additive bias (made
    4-D, _bias.bias_4d) and / or ALiBi slopes: torch calls that need autograd or tracing go through the custom
    op (or its autograd twin) with the packed words, the bias and the slopes, which autograd saves for the
    backward; the rest takes the array-agnostic path (DLPack, fastattn.forward's)."""
    _core.check_alibi_dtype(alibi_slopes)
    varlen = index_arrays[0] is not None or index_arrays[1] is not None
    s_axis = 2 if heads_first else 1
    seqlen_q = _core.longest_of(max_seqlens[0], index_arrays[0]) if varlen else q.shape[s_axis]
    seqlen_k = _core.longest_of(max_seqlens[1], index_arrays[1]) if varlen else k.shape[s_axis]
    bias = _bias.bias_4d(bias, seqlen_q, seqlen_k)
    if torch is not None and isinstance(q, torch.Tensor):
        path = _torch_path(torch, q, k, v)
        if path != "inference":
            for name, x in (("k", k), ("v", v), ("block_mask", block_mask), ("mask", mask), ("bias", bias),
                            ("alibi_slopes", alibi_slopes)):
                if x is not None and not isinstance(x, torch.Tensor):
                    raise TypeError(f"{name}: expected a torch array like q, got {type(x).__name__}")
            for name, x in zip(_INDEX_NAMES, index_arrays):
                if x is not None and not isinstance(x, torch.Tensor):
                    raise TypeError(f"{name}: expected a torch tensor like q, got {type(x).__name__}")
            if heads_first:
                q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            bits = None if mask is None else _bit_mask.pack(mask, seqlen_k=seqlen_k)
            return _torch_fwd(q, k, v, index_arrays, max_seqlens, softmax_scale, causal, window_size, softcap,
                              deterministic, path == "autograd", block_mask, block_size, bits, bias, alibi_slopes)
    xs = arrays_for(q, "q")
    same_kind(xs, [("k", k), ("v", v), ("block_mask", block_mask), ("mask", mask), ("bias", bias),
                   ("alibi_slopes", alibi_slopes)] + list(zip(_INDEX_NAMES, index_arrays)))
    if heads_first:
        q, k, v = xs.swap12(q), xs.swap12(k), xs.swap12(v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        _core.check_rank(x, name, varlen)
    left, right = _core.window_pair(window_size)
    scale = _core.resolve_scale(softmax_scale, q.shape[-1])
    return _core.run_forward(xs, q, k, v, index_arrays, operator.index(max_seqlens[0]),
                             operator.index(max_seqlens[1]), scale, bool(causal), left, right,
                             float(softcap), check_index_arrays=True, block_mask=block_mask,
                             block_size=block_size, bias=bias, alibi_slopes=alibi_slopes,
                             bit_mask=None if mask is None else _bit_mask.pack(mask, seqlen_k=seqlen_k))


def _torch_path(torch, q, k, v):
    """How a torch call runs. Plain tensors outside torch.compile skip the custom op's dispatch
    (the larger part of a small call's host time): "inference" runs the extension directly,
    "autograd" its autograd twin (_torch_ops.DirectAttention). "op" otherwise: subclasses (fake,
    functional, DTensor) and tracing go through fastattn::fwd."""
    Tensor = torch.Tensor
    if type(q) is not Tensor or type(k) is not Tensor or type(v) is not Tensor or _is_compiling(torch):
        return "op"
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return "autograd"
    return "inference"


def _eager_inference(torch, q, k, v):
    """True when a torch call needs neither autograd nor tracing (runs the extension directly)."""
    return _torch_path(torch, q, k, v) == "inference"


_COMPILING = None  # torch.compiler.is_compiling, looked up on first use
_VIEWS = None  # the _torch_views module (it imports torch, so not at import time)


def _torch_views():
    global _VIEWS
    if _VIEWS is None:
        from . import _torch_views as views

        _VIEWS = views
    return _VIEWS


def _is_compiling(torch):
    global _COMPILING
    if _COMPILING is None:
        _COMPILING = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    return _COMPILING()


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, *, window_size=(-1, -1), softcap=0.0,
                    deterministic=False, return_attn_probs=False, block_mask=None,
                    block_size=_block_mask.DEFAULT_BLOCK_SIZE, mask=None, bias=None, dropout_p=0.0,
                    alibi_slopes=None, num_splits=1, pack_gqa=None, sm_margin=0, q_descale=None, k_descale=None,
                    v_descale=None, qv=None):
    """Attention over (batch, seqlen, heads, head_dim) arrays, as FA3's flash_attn_func.

    q: (b, s_q, h, d); k: (b, s_k, h_kv, d); v: (b, s_k, h_kv, d_v) with h % h_kv == 0 (GQA/MQA).
    softmax_scale defaults to 1/sqrt(d). causal and window_size are bottom-right aligned.
    softcap > 0 replaces scores s by softcap * tanh(s / softcap).
    deterministic=True makes the backward (torch autograd) bitwise reproducible: ordered
    accumulation of dq (and of dk/dv over the query heads of a KV head) on the GPU, at some cost;
    the CPU backward always is.
    Returns out (b, s_q, h, d_v); with return_attn_probs=True returns (out, softmax_lse) with
    softmax_lse (b, h, s_q) float32 (FA3's convention: it never returns the probability matrix).
    block_mask: None, a 4-D bool / uint8 array (mask_batch in {1, b}, mask_heads dividing h,
    q_blocks >= ceil(s_q / block_q), k_blocks >= ceil(s_k / block_k)) of kept blocks of
    block_size = (block_q, block_k), ANDed with causal / window_size; or a torch FlexAttention
    BlockMask whose kept blocks need no mask_mod (its BLOCK_SIZE is used). Rows that keep no key
    get out 0 and lse -inf. The backward applies the same mask (docs/masks.md). Without a
    block_mask, block_size is ignored (as fastattn.forward does).
    mask: None, or a bool keep-mask of every pair (True = keep; SDPA's boolean attn_mask), (s_q, s_k),
    (mask_heads, s_q, s_k) or (mask_batch, mask_heads, s_q, s_k), ANDed with causal / window_size;
    packed into bits on its device (docs/masks.md, Element bitmasks); torch autograd saves the packed
    bits and its backward applies them (fastattn.backward takes mask= too).
    bias: None, or an additive score bias (float32 / bf16 / fp16 array of q's kind), (s_q, s_k), (heads,
    s_q, s_k) or (batch, heads, s_q, s_k) (heads and batch 1 or full, heads dividing h; query / key dims
    of size 1 broadcast), added after softcap: softmax(scale * q k^T + bias) as SDPA's float attn_mask;
    -inf entries mask; combines with causal / window_size / block_mask / mask (docs/masks.md, Additive
    bias). torch autograd gives a bias that requires grad its gradient (broadcast dims summed).
    alibi_slopes: None, or FlashAttention's ALiBi slopes, float32 (h,) or (b, h) of q's kind: adds
    -slope[b, h] * |i + s_k - s_q - j| to the score after softcap (beside any bias; fp32 in the kernel);
    no gradient for the slopes. CUDA: sm90, head dims <= 128 (backward 96 / 128), not with bias
    (docs/python.md, alibi_slopes); the CPU backend takes every case.
    Arguments after `causal` are keyword-only (FA3 has other parameters at those positions). FA2's order
    (dropout_p fourth) is caught where it shows: softmax_scale 0 and a causal that is not a bool are refused.
    FA2/FA3 keywords: num_splits, pack_gqa, sm_margin are scheduling hints, checked and unused (no
    split without a KV cache; the result is the same); dropout_p > 0, q/k/v_descale (fp8) and qv raise
    NotImplementedError (docs/python.md, FlashAttention compatibility).
    """
    _fa_compat.check_order(softmax_scale, causal)
    _fa_compat.check(dropout_p=dropout_p, num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin,
                     q_descale=q_descale, k_descale=k_descale, v_descale=v_descale, qv=qv)
    torch = torch_module()
    if (block_mask is None and mask is None and bias is None and alibi_slopes is None and torch is not None
            and _torch_path(torch, q, k, v) == "inference"):  # the plain eager call, without attention()'s dispatch
        out, lse = _eager_inference_forward(q, k, v, _NO_INDEX, (0, 0), softmax_scale, causal, window_size, softcap,
                                            return_attn_probs)
    else:
        out, lse = attention(q, k, v, softmax_scale=softmax_scale, causal=causal,
                             window_size=window_size, softcap=softcap, deterministic=deterministic,
                             with_lse=return_attn_probs, block_mask=block_mask, block_size=block_size, mask=mask,
                             bias=bias, alibi_slopes=alibi_slopes)
    return (out, lse) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_q=None, seqused_k=None, softmax_scale=None, causal=False, *,
                           window_size=(-1, -1), softcap=0.0, deterministic=False,
                           return_attn_probs=False, block_mask=None,
                           block_size=_block_mask.DEFAULT_BLOCK_SIZE, mask=None, bias=None,
                           dropout_p=0.0, alibi_slopes=None, num_splits=1, pack_gqa=None, sm_margin=0,
                           q_descale=None, k_descale=None, v_descale=None, qv=None):
    """Attention over packed variable-length sequences, as FA3's flash_attn_varlen_func.

    q: (total_q, h, d); k/v: (total_k, h_kv, d|d_v); cu_seqlens_q/k: int32 (batch + 1,) offsets
    starting at 0; max_seqlen_q/k: ints bounding the sequence lengths; seqused_q/k: optional int32
    (batch,) caps on the tokens used per sequence. Returns out (total_q, h, d_v), or
    (out, softmax_lse) with softmax_lse (h, total_q) when return_attn_probs=True.
    On CUDA torch tensors the index arrays are not validated (that would sync with the host).
    deterministic, block_mask, block_size: as flash_attn_func; the mask's block rows and columns
    count from the start of each sequence (q_blocks >= ceil(max_seqlen_q / block_q), etc.); mask as
    flash_attn_func, its rows and columns counted from the start of each sequence (s_q >= max_seqlen_q);
    bias likewise (rows >= max_seqlen_q, cols >= max_seqlen_k). alibi_slopes: as flash_attn_func, (h,) or
    (batch, h) (batch = len(cu_seqlens_q) - 1), i and j counted from each sequence's start and s_q, s_k its
    used lengths.
    """
    _fa_compat.check(dropout_p=dropout_p, num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin,
                     q_descale=q_descale, k_descale=k_descale, v_descale=v_descale, qv=qv)
    if cu_seqlens_q is None or cu_seqlens_k is None:
        raise ValueError("cu_seqlens_q and cu_seqlens_k: both are required for varlen attention")
    torch = torch_module()
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise ValueError(f"{name}: expected an int, got {type(value).__name__}")
        if torch is None or not isinstance(value, torch.SymInt):  # a traced size: no guard on its value
            int_arg(value, name, 0)  # the extension's int32: ValueError past it, not the binding's TypeError
    out, lse = attention(q, k, v, (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k),
                         (max_seqlen_q, max_seqlen_k), softmax_scale=softmax_scale, causal=causal,
                         window_size=window_size, softcap=softcap, deterministic=deterministic,
                         with_lse=return_attn_probs, block_mask=block_mask, block_size=block_size, mask=mask,
                         bias=bias, alibi_slopes=alibi_slopes)
    return (out, lse) if return_attn_probs else out
