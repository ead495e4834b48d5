"""torch tensors handed to the extension as plain values: the torch fast path.

A view is (data_ptr, shape, strides, dtype code, device, owner), read straight off the tensor
(python/src/views.h): no DLPack capsule per array, which was most of a small call's host time.
The C++ layer validates every view (dtype, device, rank, strides, shapes, GQA ratio, index
arrays) and names the argument, so nothing here checks what it will check again. Outputs are
allocated once per call (new_empty: q's dtype and device, dense).
"""
import numpy as np
import torch

from . import _C
from ._arrays import tma_unreadable
from ._core import NO_INDEX, check_rank
from ._ints import int_arg

_DTYPES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.int32: 3}
_F32 = _DTYPES[torch.float32]
_BYTE_DTYPES = (torch.bool, torch.uint8)
_BYTE = 4  # the view dtype code of bool / uint8 (block masks)


def view(t, heads_first=False):
    """t's view. A last dimension without unit stride is copied contiguous, so is a CUDA tensor with a
    broadcast (stride 0) dim, as FlashAttention reads expanded k / v, and a negated view (torch's neg
    bit) resolved, as the DLPack path does; the copy rides along as the owner.
    heads_first: t is 4-D (b, h, s, d), viewed as (b, s, h, d): what view(t.transpose(1, 2))
    gives, without the torch call (SDPA's and transformers' layout). One function, inline: this
    runs three times per call."""
    strides = t.stride()
    if strides and strides[-1] != 1 and t.shape[-1] > 1:
        t = t.contiguous()
        strides = t.stride()
    elif 0 in strides and t.is_cuda and tma_unreadable(t.shape, strides):
        t = t.contiguous()  # a broadcast (expand) dim: the CUDA kernels load by TMA, positive strides only
        strides = t.stride()
    if t.is_neg():
        t = t.resolve_neg()  # a copy, whose layout may differ from the view's (gaps are dropped)
        strides = t.stride()
    shape = t.shape
    if heads_first:
        b, h, s, d = shape
        sb, sh, ss, sd = strides
        shape, strides = (b, s, h, d), (sb, ss, sh, sd)
    device = t.get_device() if t.is_cuda else (-1 if t.is_cpu else str(t.device))
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:  # the name the C++ layer's message gives, as DLPack would have
        dtype = _dtype_name(t)
    return (t.data_ptr(), shape, strides, dtype, device, t)


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _out_view(t, dtype_code, device):
    """A view of an output this module allocated (dense, on the inputs' device)."""
    return (t.data_ptr(), t.shape, t.stride(), dtype_code, device, t)


_NO_BLOCKS = {}


def _mask_kw(blocks, bits=None):
    """forward_views / backward_views keywords of a block mask: its view (a 4-D bool / uint8 tensor,
    any strides: the C++ layer reads it byte by byte) and block sizes; of an element bitmask: the view
    of its packed int32 words (_bit_mask.pack); none without either.
    blocks: (mask, block_q, block_k) or None; bits: a 4-D int32 tensor or None."""
    if blocks is None and bits is None:
        return _NO_BLOCKS
    kw = {}
    if blocks is not None:
        mask, block_q, block_k = blocks
        device = mask.get_device() if mask.is_cuda else (-1 if mask.is_cpu else str(mask.device))
        dtype = _BYTE if mask.dtype in _BYTE_DTYPES else _dtype_name(mask)
        kw = {"block_mask": (mask.data_ptr(), mask.shape, mask.stride(), dtype, device, mask),
              "block_q": block_q, "block_k": block_k}
    if bits is not None:
        device = bits.get_device() if bits.is_cuda else (-1 if bits.is_cpu else str(bits.device))
        dtype = _DTYPES.get(bits.dtype, None) if bits.dtype == torch.int32 else _dtype_name(bits)
        kw["bit_mask"] = (bits.data_ptr(), bits.shape, bits.stride(), dtype, device, bits)
    return kw


def _index_views(index_arrays):
    return tuple(None if x is None else view(x) for x in index_arrays)


def _public_raw_stream(index):
    return torch.cuda.current_stream(index).cuda_stream


# torch's C getters of the current device and stream (what its compiled code calls), else the
# public API; neither initialises CUDA.
_current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _public_raw_stream)


def _call(fn, args, device, kw=_NO_BLOCKS):
    """fn(*args, stream, **kw): stream 0 on the CPU; on a CUDA device its current stream, the device
    made current for the call."""
    if type(device) is not int or device < 0:
        return fn(*args, 0, **kw)
    if _current_device() == device:
        return fn(*args, _raw_stream(device), **kw)
    with torch.cuda.device(device):
        return fn(*args, _raw_stream(device), **kw)


def _with_score_terms(kw, bias, alibi_slopes):
    """kw (forward_views / backward_views keywords) plus the views of the bias and the ALiBi slopes, where given."""
    if bias is None and alibi_slopes is None:
        return kw
    kw = dict(kw)
    if bias is not None:
        kw["bias"] = view(bias)
    if alibi_slopes is not None:
        kw["alibi_slopes"] = view(alibi_slopes)
    return kw


def forward(q, k, v, index_arrays, max_seqlen_q, max_seqlen_k, scale, causal, window_left,
            window_right, softcap, check_index_arrays, with_lse=True, heads_first=False, blocks=None, bits=None,
            bias=None, alibi_slopes=None):
    """(out, lse) with every scalar already resolved; lse is None unless with_lse.
    index_arrays: (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k), None where absent.
    heads_first: q, k, v are 4-D (b, h, s, d) (fixed length only); out is (b, s_q, h, d_v) still.
    blocks: (block_mask tensor, block_q, block_k) or None; bits: packed element-mask words (int32) or None.
    bias: a 4-D additive score bias (bias_batch, bias_heads, rows, cols) or None (docs/masks.md).
    alibi_slopes: float32 (heads_q) or (batch, heads_q) ALiBi slopes or None."""
    qv = view(q, heads_first)
    shape = qv[1]
    out = q.new_empty((*shape[:-1], v.shape[-1]))
    cu_q, cu_k, used_q, used_k = index_arrays if index_arrays is NO_INDEX else _index_views(index_arrays)
    lse = lse_view = None
    if with_lse:
        varlen = cu_q is not None or cu_k is not None
        lse = q.new_empty((shape[1], shape[0]) if varlen else (shape[0], shape[2], shape[1]),
                          dtype=torch.float32)
        lse_view = _out_view(lse, _F32, qv[4])
    args = (qv, view(k, heads_first), view(v, heads_first), _out_view(out, qv[3], qv[4]), lse_view, cu_q, cu_k, used_q, used_k,
            max_seqlen_q, max_seqlen_k, scale, causal, window_left, window_right, softcap,
            check_index_arrays, 0, 0)
    _call(_C.forward_views, args, qv[4], _with_score_terms(_mask_kw(blocks, bits), bias, alibi_slopes))
    return out, lse


def backward(dout, q, k, v, out, lse, index_arrays, max_seqlen_q, max_seqlen_k, scale, causal,
             window_left, window_right, softcap, check_index_arrays, deterministic, blocks=None, bits=None,
             bias=None, with_dbias=False, alibi_slopes=None):
    """(dq, dk, dv) of forward's out given its gradient dout; scalars, blocks, bits, bias, alibi_slopes as forward.
    with_dbias (needs bias): (dq, dk, dv, dbias), dbias fp32 in bias's shape (broadcast dims summed)."""
    qv, kv, vv = view(q), view(k), view(v)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    args = (view(dout), qv, kv, vv, view(out), view(lse), view(dq), view(dk), view(dv),
            *_index_views(index_arrays), max_seqlen_q, max_seqlen_k, scale, causal, window_left,
            window_right, softcap, check_index_arrays, 0, 0, deterministic)
    kw = _with_score_terms(_mask_kw(blocks, bits), bias, alibi_slopes)
    if not with_dbias:
        _call(_C.backward_views, args, qv[4], kw)
        return dq, dk, dv
    dbias = torch.empty(bias.shape, device=q.device, dtype=torch.float32)
    kw["dbias"] = _out_view(dbias, _F32, qv[4])
    _call(_C.backward_views, args, qv[4], kw)
    return dq, dk, dv, dbias


def _cache_view(t, name):
    """A view of a cache the call writes in place: never a copy (a copy would take the writes).
    A non-unit last stride goes through as is, for the C++ layer to reject by name."""
    if t.is_neg():
        raise ValueError(f"{name}: a negated view (torch's neg bit) cannot be written in place; "
                         "pass a resolved tensor")
    device = t.get_device() if t.is_cuda else (-1 if t.is_cpu else str(t.device))
    dtype = _DTYPES.get(t.dtype)
    return (t.data_ptr(), t.shape, t.stride(), _dtype_name(t) if dtype is None else dtype, device, t)


def _tensor_or_none(x, name):
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch array like q, got {type(x).__name__}")
    return view(x)


def _index_view(x, name, batch, q):
    """cache_seqlens & co: None, an int in [0, 2^31 - 1] (or numpy integer scalar; one for every
    sequence) or a 1-D int32 tensor."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return view(x)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"{name}: expected an int or an int32 tensor, got {type(x).__name__}")
    return view(torch.full((batch,), int_arg(x, name, 0), dtype=torch.int32, device=q.device))


def forward_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                    cache_leftpad, page_table, rotary_interleaved, scale, causal, window_left,
                    window_right, softcap, num_splits, with_lse, alibi_slopes=None):
    """flash_attn_with_kvcache on torch tensors (q's type already checked): (out, lse or None).
    Scalars already resolved. The caches are written in place, so they are never copied.
    alibi_slopes: float32 (heads_q) or (batch, heads_q) ALiBi slopes (dtype checked: check_alibi_dtype) or None."""
    for name, x in (("k_cache", k_cache), ("v_cache", v_cache), ("block_table", page_table)):
        if x is not None and not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch array like q, got {type(x).__name__}")
    if q.dim() != 4 or k_cache.dim() != 4 or v_cache.dim() != 4:
        for name, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
            check_rank(x, name, varlen=False)
    qv = view(q)
    out = q.new_empty((*q.shape[:-1], v_cache.shape[-1]))
    lse_view = lse = None
    if with_lse:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        lse_view = _out_view(lse, _F32, qv[4])
    if page_table is not None:
        page_table = view(page_table.contiguous())
    batch = q.shape[0]
    args = (qv, _cache_view(k_cache, "k_cache"), _cache_view(v_cache, "v_cache"), _tensor_or_none(k, "k"),
            _tensor_or_none(v, "v"), _out_view(out, qv[3], qv[4]), lse_view,
            _tensor_or_none(rotary_cos, "rotary_cos"), _tensor_or_none(rotary_sin, "rotary_sin"),
            _index_view(cache_seqlens, "cache_seqlens", batch, q),
            _index_view(cache_batch_idx, "cache_batch_idx", batch, q),
            _index_view(cache_leftpad, "cache_leftpad", batch, q), page_table, rotary_interleaved,
            scale, causal, window_left, window_right, softcap, num_splits, not q.is_cuda, 0, 0)
    kw = _NO_BLOCKS if alibi_slopes is None else {"alibi_slopes": _tensor_or_none(alibi_slopes, "alibi_slopes")}
    _call(_C.forward_kvcache_views, args, qv[4], kw)
    return out, lse
