"""The torch fast path (tensors handed to the extension as plain-value views) against the DLPack
path (fastattn.forward / fastattn.backward on the same tensors): the same bits for strided,
non-contiguous, GQA and varlen inputs, and the same clear errors for bad ones."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fast-path tests skipped")

import fastattn  # noqa: E402
from fastattn import _torch_views  # noqa: E402


CUDA = torch.cuda.is_available() and fastattn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])


def randn(rng, shape, device="cpu"):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    return x if device == "cpu" else x.to(device, torch.bfloat16)


def strided(rng, shape, how, device="cpu"):
    """A (b|t, s, h, d)-shaped tensor laid out `how`: dense, transposed (a (b, h, s, d) buffer),
    sliced (gaps between heads), or with a non-unit last stride (the path must copy it)."""
    if how == "dense":
        return randn(rng, shape, device)
    if how == "transposed":
        return randn(rng, (shape[0], shape[2], shape[1], *shape[3:]), device).transpose(1, 2)
    if how == "sliced":
        return randn(rng, (*shape[:-2], shape[-2] * 2, shape[-1]), device)[..., ::2, :]
    assert how == "last_strided"
    return randn(rng, (*shape[:-1], shape[-1] * 2), device)[..., ::2]


def direct(q, k, v, **kw):
    with torch.no_grad():
        return fastattn.flash_attn_func(q, k, v, return_attn_probs=True, **kw)


SHAPES = [("cpu", (1, 1, 1, 1, 1, 64)), ("cpu", (2, 17, 113, 4, 2, 32)), ("cpu", (1, 113, 17, 6, 1, 64))]
SHAPES += [("cuda", (2, 17, 113, 4, 2, 128)), ("cuda", (1, 113, 4097, 6, 1, 128))] if CUDA else []
D = {"cpu": 64, "cuda": 128}  # scripts/gpu-check-inference builds head dim 128 only


@pytest.mark.parametrize("how", ["dense", "transposed", "sliced", "last_strided"])
@pytest.mark.parametrize("device,shape", SHAPES)
def test_fixed_same_bits(rng, how, device, shape):
    b, s_q, s_k, h, h_kv, d = shape
    q = strided(rng, (b, s_q, h, d), how, device)
    k, v = strided(rng, (b, s_k, h_kv, d), how, device), strided(rng, (b, s_k, h_kv, d), how, device)
    kw = dict(causal=True, window_size=(5, 3), softcap=2.5)
    out_fast, lse_fast = direct(q, k, v, **kw)
    out_op, lse_op = torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, d ** -0.5, True, 5, 3, 2.5)
    out_dl, lse_dl = fastattn.forward(q, k, v, **kw)  # DLPack
    assert torch.isfinite(out_dl).all()
    for out, lse in ((out_fast, lse_fast), (out_op, lse_op)):
        assert torch.equal(out, out_dl) and torch.equal(lse, lse_dl)
    assert torch.equal(direct(q, k, v, **kw)[0], fastattn.flash_attn_func(q, k, v, **kw).detach())


@pytest.mark.parametrize("how", ["dense", "sliced"])
@pytest.mark.parametrize("device", DEVICES)
def test_varlen_same_bits(rng, how, device):
    lens_q, lens_k = [1, 17, 0, 40], [113, 3, 5, 40]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device=device)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device=device)
    used_k = torch.tensor([100, 3, 0, 7], dtype=torch.int32, device=device)
    q = strided(rng, (int(cu_q[-1]), 4, D[device]), how, device)
    k, v = (strided(rng, (int(cu_k[-1]), 2, D[device]), how, device) for _ in range(2))
    with torch.no_grad():
        out, lse = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 40, 113, seqused_k=used_k,
                                                   causal=True, return_attn_probs=True)
    out_dl, lse_dl = fastattn.forward(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqused_k=used_k,
                                      max_seqlen_q=40, max_seqlen_k=113, causal=True)
    assert torch.equal(out, out_dl) and torch.equal(lse, lse_dl)


def test_negated_view_is_resolved(rng):
    """torch's neg bit (x.conj().imag & co) is resolved, never read as the un-negated data."""
    q, k, v = (randn(rng, (1, 9, 2, 32)) for _ in range(3))
    neg_q = torch._neg_view(q)
    assert neg_q.is_neg()
    assert torch.equal(direct(neg_q, k, v)[0], direct(-q, k, v)[0])


@pytest.mark.parametrize("how", ["sliced", "transposed"])
def test_negated_strided_view_reads_its_copy_with_the_copy_strides(rng, how):
    """Resolving the neg bit copies; a sliced view's copy is laid out without its gaps, so the view
    must carry the copy's strides, not the original's."""
    q, k, v = (strided(rng, (2, 9, 3, 32), how) for _ in range(3))
    got = direct(torch._neg_view(q), torch._neg_view(k), v)[0]
    assert torch.equal(got, direct(-q, -k, v)[0])


@pytest.mark.parametrize("device", DEVICES)
def test_backward_same_bits(rng, device):
    q, k, v = (strided(rng, (2, 17, 4, D[device]), "transposed", device) for _ in range(3))
    k, v = k[:, :, :2], v[:, :, :2]
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    out = fastattn.flash_attn_func(qg, kg, vg, causal=True, deterministic=True)
    dout = randn(rng, tuple(out.shape), device)
    out.backward(dout)
    out_dl, lse_dl = fastattn.forward(q, k, v, causal=True)
    dq, dk, dv = fastattn.backward(dout, q, k, v, out_dl, lse_dl, causal=True, deterministic=True)
    assert torch.equal(qg.grad, dq) and torch.equal(kg.grad, dk) and torch.equal(vg.grad, dv)


def both_paths_raise(exc, pattern, q, k, v, **kw):
    with pytest.raises(exc, match=pattern):
        direct(q, k, v, **kw)
    with pytest.raises(exc, match=pattern):
        fastattn.forward(q, k, v, **kw)


def test_bad_inputs_keep_the_messages(rng):
    q, k, v = (randn(rng, (1, 8, 2, 32)) for _ in range(3))
    both_paths_raise(ValueError, r"^q: dtype float64 is not supported", q.double(), k, v)
    both_paths_raise(ValueError, r"^v: dtype int32 is not supported", q, k, v.int())
    both_paths_raise(ValueError, "dtype", q, k.half(), v)
    both_paths_raise(ValueError, "head", randn(rng, (1, 8, 3, 32)), k, v)
    both_paths_raise(ValueError, "batch", q, torch.cat([k, k]), v)
    both_paths_raise(ValueError, "dim", q, randn(rng, (1, 8, 2, 64)), v)
    with pytest.raises(ValueError, match=r"^k: device meta is not supported"):
        direct(q, k.to("meta"), v)
    with pytest.raises(ValueError, match=r"^q: expected 4 dimensions"):
        direct(q[0], k, v)


def test_bad_index_arrays_keep_the_messages(rng):
    q, k, v = (randn(rng, (8, 2, 32)) for _ in range(3))
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    varlen = fastattn.flash_attn_varlen_func
    with pytest.raises(ValueError, match=r"^cu_seqlens_q: expected dtype int32, got int64"):
        varlen(q, k, v, cu.long(), cu, 5, 5)
    gappy = torch.tensor([0, 9, 3, 9, 8, 9], dtype=torch.int32)[::2]  # copied, as DLPack's path does
    with torch.no_grad():
        assert torch.equal(varlen(q, k, v, cu, gappy, 5, 5), varlen(q, k, v, cu, cu, 5, 5))
    with pytest.raises(ValueError, match=r"^seqused_k: expected 1 dimension"):
        varlen(q, k, v, cu, cu, 5, 5, seqused_k=cu[None])
    with pytest.raises(ValueError, match="cu_seqlens"):
        varlen(q, k, v, cu, torch.tensor([0, 3, 9], dtype=torch.int32), 5, 5)


def test_malformed_view_is_a_type_error():
    with pytest.raises(TypeError, match="^q: expected a view"):
        fastattn._C.forward_views((1, 2), (1, 2), (1, 2), (1, 2), None, None, None, None, None, 0, 0,
                                  1.0, False, -1, -1, 0.0, True, 0, 0, 0)


def test_view_keeps_its_copy_alive(rng):
    x = strided(rng, (1, 3, 2, 8), "last_strided")
    view = _torch_views.view(x)
    assert view[5] is not x and view[5].stride(-1) == 1 and view[0] == view[5].data_ptr()
