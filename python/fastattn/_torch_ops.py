"""torch.library custom ops fastattn::fwd and fastattn::bwd, their fake kernels and autograd.

fwd carries `deterministic` although the forward ignores it: autograd hands the forward's inputs
to the backward, so this is how flash_attn_func(deterministic=True) reaches fastattn::bwd.

Registered on import when torch is importable. The ops allocate only their outputs and pass the
current CUDA stream, so they run under torch.compile(fullgraph=True) and inside CUDA graphs.
Varlen index arrays on CUDA are not validated inside the ops (validation would copy them to the
host, a sync); the caller vouches for cu_seqlens/seqused there. On the CPU they are validated.
Both ops hand their tensors to the extension as plain-value views (_torch_views), not DLPack.
block_mask (an optional bool / uint8 tensor of kept blocks, docs/masks.md) and its block_q / block_k,
then bit_mask (optional packed int32 words of an element mask, _bit_mask.pack), come last with defaults,
so calls without a mask keep their schema; autograd saves either mask for bwd. bias (an optional 4-D
additive score bias, docs/masks.md) comes after them: autograd saves it too, and when it requires grad the
backward runs fastattn::bwd_dbias, which also returns dbias (fp32, in the bias's 4-D shape: the front end
unsqueezed / expanded the user's bias with torch ops, whose own backward sums the broadcast dims).
alibi_slopes (optional float32 (heads_q) or (batch, heads_q) ALiBi slopes) comes last of all: autograd
saves it for bwd / bwd_dbias and gives it no gradient (as FlashAttention).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _torch_views


@torch.library.custom_op("fastattn::fwd", mutates_args=())
def fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
        seqused_q: Optional[Tensor], seqused_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int,
        softmax_scale: float, causal: bool, window_left: int, window_right: int,
        softcap: float, deterministic: bool = False, block_mask: Optional[Tensor] = None,
        block_q: int = 128, block_k: int = 128, bit_mask: Optional[Tensor] = None,
        bias: Optional[Tensor] = None, alibi_slopes: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Attention forward: (out, lse); see fastattn.forward for layouts. `deterministic` is for
    the backward autograd derives from this op."""
    return _torch_views.forward(q, k, v, (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k),
                                max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
                                window_right, softcap, not q.is_cuda,
                                blocks=None if block_mask is None else (block_mask, block_q, block_k),
                                bits=bit_mask, bias=bias, alibi_slopes=alibi_slopes)


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k,
              softmax_scale, causal, window_left, window_right, softcap, deterministic=False,
              block_mask=None, block_q=128, block_k=128, bit_mask=None, bias=None, alibi_slopes=None):
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if cu_seqlens_q is not None:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("fastattn::bwd", mutates_args=())
def bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
        cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], seqused_q: Optional[Tensor],
        seqused_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
        causal: bool, window_left: int, window_right: int,
        softcap: float, deterministic: bool = False, block_mask: Optional[Tensor] = None,
        block_q: int = 128, block_k: int = 128, bit_mask: Optional[Tensor] = None,
        bias: Optional[Tensor] = None, alibi_slopes: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Attention backward: (dq, dk, dv) from dout and the forward's (out, lse); deterministic:
    bitwise equal from run to run; block_mask, bit_mask, bias and alibi_slopes as the forward's."""
    return _torch_views.backward(dout, q, k, v, out, lse, (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k),
                                 max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
                                 window_right, softcap, not q.is_cuda, deterministic,
                                 None if block_mask is None else (block_mask, block_q, block_k), bit_mask,
                                 bias=bias, alibi_slopes=alibi_slopes)


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, *args):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@torch.library.custom_op("fastattn::bwd_dbias", mutates_args=())
def bwd_dbias(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
              cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], seqused_q: Optional[Tensor],
              seqused_k: Optional[Tensor], max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
              causal: bool, window_left: int, window_right: int, softcap: float, deterministic: bool,
              block_mask: Optional[Tensor], block_q: int, block_k: int, bit_mask: Optional[Tensor],
              bias: Tensor, alibi_slopes: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """bwd plus the bias's gradient: (dq, dk, dv, dbias), dbias fp32 in bias's shape."""
    return _torch_views.backward(dout, q, k, v, out, lse, (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k),
                                 max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
                                 window_right, softcap, not q.is_cuda, deterministic,
                                 None if block_mask is None else (block_mask, block_q, block_k), bit_mask,
                                 bias=bias, with_dbias=True, alibi_slopes=alibi_slopes)


@bwd_dbias.register_fake
def _bwd_dbias_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, max_seqlen_q,
                    max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap, deterministic, block_mask,
                    block_q, block_k, bit_mask, bias, alibi_slopes=None):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            bias.new_empty(bias.shape, dtype=torch.float32))


def _device_of(t):
    """A guard making t's CUDA device current (a no-op on the CPU or when it already is)."""
    if t.device.type == "cuda" and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return _NoGuard()


class _NoGuard:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_SCALARS = 8  # fwd's inputs after the 7 tensors: max_seqlen_q .. deterministic; then the block mask's 3
_MASKS = 6    # block_mask, block_q, block_k, bit_mask, bias, alibi_slopes
_BIAS = 7 + _SCALARS + 4  # the bias's input position (its gradient's place in the backward's answer)
_MASK_DEFAULTS = (None, 128, 128, None, None, None)


def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, used_q, used_k = inputs[:7]
    block_mask, block_q, block_k, bit_mask, bias, alibi = (tuple(inputs[7 + _SCALARS:]) +
                                                           _MASK_DEFAULTS[len(inputs) - 7 - _SCALARS:])
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, used_q, used_k, block_mask, bit_mask, bias, alibi)
    ctx.scalars = inputs[7:7 + _SCALARS]
    ctx.block_size = (block_q, block_k)
    ctx.mark_non_differentiable(lse)


def _gradients(ctx, dout, run_bwd, run_bwd_dbias):
    """(dq, dk, dv, None..., dbias or None, None) from the saved forward, one entry per fwd input (the
    slopes, last, get none); run_bwd / run_bwd_dbias are the ops or their direct twins."""
    q, k, v, out, lse, cu_q, cu_k, used_q, used_k, block_mask, bit_mask, bias, alibi = ctx.saved_tensors
    if dout.is_cuda and not dout.is_contiguous():
        # autograd hands expanded (stride 0) or strided gradients; the GPU backward reads dout
        # with TMA (16-byte aligned rows), so give it a dense copy, as FlashAttention does
        dout = dout.contiguous()
    none = (None,) * (4 + _SCALARS + _MASKS)
    if bias is not None or alibi is not None:  # every argument given, positionally, up to the slopes
        rest = (*ctx.scalars, block_mask, *ctx.block_size, bit_mask, bias, alibi)
        if bias is not None and ctx.needs_input_grad[_BIAS]:  # the bias's gradient through bwd_dbias
            dq, dk, dv, dbias = run_bwd_dbias(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, *rest)
            grads = (dq, dk, dv) + none
            return grads[:_BIAS] + (dbias.to(bias.dtype),) + grads[_BIAS + 1:]
        dq, dk, dv = run_bwd(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, *rest)
    elif block_mask is None and bit_mask is None:  # the schema's defaults: the same bwd call as before masks
        dq, dk, dv = run_bwd(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, *ctx.scalars)
    elif bit_mask is None:
        dq, dk, dv = run_bwd(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, *ctx.scalars, block_mask,
                             *ctx.block_size)
    else:
        dq, dk, dv = run_bwd(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, *ctx.scalars, block_mask,
                             *ctx.block_size, bit_mask)
    return (dq, dk, dv) + none


def _backward(ctx, dout, _dlse):
    return _gradients(ctx, dout, bwd, bwd_dbias)


fwd.register_autograd(_backward, setup_context=_setup_context)


def _direct_bwd(dout, q, k, v, out, lse, cu_q, cu_k, used_q, used_k, max_seqlen_q, max_seqlen_k,
                softmax_scale, causal, window_left, window_right, softcap, deterministic, block_mask=None,
                block_q=128, block_k=128, bit_mask=None, bias=None, alibi_slopes=None, with_dbias=False):
    return _torch_views.backward(dout, q, k, v, out, lse, (cu_q, cu_k, used_q, used_k), max_seqlen_q,
                                 max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                                 not q.is_cuda, deterministic,
                                 None if block_mask is None else (block_mask, block_q, block_k), bit_mask,
                                 bias=bias, with_dbias=with_dbias, alibi_slopes=alibi_slopes)


def _direct_bwd_dbias(*args):
    return _direct_bwd(*args, with_dbias=True)


class DirectAttention(torch.autograd.Function):
    """fastattn::fwd's autograd without the op: eager training on plain tensors. The op's autograd
    wrapper re-fills its arguments through torch._library.utils.fill_defaults, which rebuilds
    schema.arguments once per argument (docs/notes/inference.md: half the call); torch.compile
    and tensor subclasses keep the op. Same inputs, outputs, saved tensors and bits as the op."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, used_q, used_k, *scalars):
        blocks = scalars[_SCALARS:_SCALARS + 3]  # (block_mask, block_q, block_k), absent or None: no mask
        bits = scalars[_SCALARS + 3] if len(scalars) > _SCALARS + 3 else None  # packed element-mask words
        bias = scalars[_SCALARS + 4] if len(scalars) > _SCALARS + 4 else None  # additive score bias
        alibi = scalars[_SCALARS + 5] if len(scalars) > _SCALARS + 5 else None  # ALiBi slopes
        out, lse = _torch_views.forward(q, k, v, (cu_q, cu_k, used_q, used_k), *scalars[:7],
                                        not q.is_cuda, blocks=blocks if blocks and blocks[0] is not None else None,
                                        bits=bits, bias=bias, alibi_slopes=alibi)
        _setup_context(ctx, (q, k, v, cu_q, cu_k, used_q, used_k, *scalars), (out, lse))
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        return _gradients(ctx, dout, _direct_bwd, _direct_bwd_dbias)
