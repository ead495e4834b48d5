"""Element masks (mask=) with torch tensors: the bool mask is packed on its own device (int32 words,
the same bits as numpy's packing), and fastattn.forward / backward with a torch mask give the numpy
call's results bit for bit on the CPU backend; torch autograd (eager twin, custom op, torch.compile)
with a mask against the float64 reference, on the CPU backend and, with a device, the CUDA backward.
Skipped without torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch mask tests skipped")

import fastattn  # noqa: E402
import torch_reference  # noqa: E402
from checks import FLOAT32_FLOOR, assert_close  # noqa: E402
from fastattn import _bit_mask  # noqa: E402


def test_torch_packing_matches_numpy(rng):
    for s_k in (1, 31, 32, 33, 70):
        mask = rng.random((2, 3, 5, s_k)) < 0.5
        words = _bit_mask.pack(torch.from_numpy(mask))
        assert words.dtype == torch.int32 and tuple(words.shape) == (2, 3, 5, -(-s_k // 32))
        assert np.array_equal(words.numpy().view("<u4"), _bit_mask.pack(mask))


def test_torch_mask_equals_numpy_mask(rng):
    q, k, v, dout = (rng.standard_normal(s).astype(np.float32) for s in ((2, 33, 4, 32), (2, 47, 2, 32),
                                                                         (2, 47, 2, 32), (2, 33, 4, 32)))
    mask = rng.random((2, 33, 47)) < 0.5
    out_np, lse_np = fastattn.forward(q, k, v, causal=True, mask=mask)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    out_t, lse_t = fastattn.forward(tq, tk, tv, causal=True, mask=torch.from_numpy(mask))
    assert np.array_equal(out_t.numpy(), out_np) and np.array_equal(lse_t.numpy(), lse_np)
    g_np = fastattn.backward(dout, q, k, v, out_np, lse_np, causal=True, mask=mask)
    g_t = fastattn.backward(torch.from_numpy(dout), tq, tk, tv, out_t, lse_t, causal=True, mask=torch.from_numpy(mask))
    assert all(np.array_equal(a.numpy(), b) for a, b in zip(g_t, g_np))


@pytest.mark.skipif(not (torch.cuda.is_available() and fastattn.cuda_available()), reason="no CUDA device")
def test_cuda_mask_is_packed_on_the_device(rng):
    mask = torch.rand(2, 300, 700, device="cuda") < 0.5
    words = _bit_mask.pack(mask)
    assert words.is_cuda
    assert np.array_equal(words.cpu().numpy().view("<u4"), _bit_mask.pack(mask.cpu().numpy()))
    q = torch.randn(2, 300, 2, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 700, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out, lse = fastattn.forward(q, k, v, mask=mask)
    keep = mask[None]  # a 3-D mask is (mask_heads, s_q, s_k): one per head, shared by the batch
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(), attn_mask=keep)
    assert torch.allclose(out.float(), ref.transpose(1, 2), atol=2e-2, rtol=2e-2)


def test_front_ends_take_a_torch_mask(rng):
    """flash_attn_func(mask=) and scaled_dot_product_attention(attn_mask=) with torch CPU tensors under
    no_grad: torch's own SDPA with the same boolean mask; with inputs that require grad: torch's SDPA's
    gradients (autograd saves the packed bits, the backward applies them)."""
    q = torch.from_numpy(rng.standard_normal((2, 4, 33, 32)).astype(np.float32))
    k, v = (torch.from_numpy(rng.standard_normal((2, 4, 47, 32)).astype(np.float32)) for _ in range(2))
    attn_mask = torch.from_numpy(rng.random((2, 1, 33, 47)) < 0.5)
    with torch.no_grad():
        out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=attn_mask)
        assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
        out_fa = fastattn.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask=attn_mask)
        assert torch.allclose(out_fa.transpose(1, 2).double(), want, atol=1e-5, rtol=1e-5)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = fastattn.scaled_dot_product_attention(*leaves, attn_mask=attn_mask)
    dout = torch.from_numpy(rng.standard_normal(out.shape).astype(np.float32))
    out.backward(dout)
    ref = [x.detach().double().requires_grad_() for x in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*ref, attn_mask=attn_mask).backward(dout.double())
    for name, got, want in zip(("dq", "dk", "dv"), leaves, ref):
        assert torch.allclose(got.grad.double(), want.grad, atol=1e-4, rtol=1e-4), name


def _reference_grads(q, k, v, dout, **kw):
    """(out, dq, dk, dv) in float64 by autograd through the torch reference."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    out = torch_reference.attention(*leaves, **kw)
    out.backward(dout.double())
    return out.detach(), *(x.grad for x in leaves)


def _bits4(mask, b):
    """A flash_attn_func mask (s_q, s_k) / (h, s_q, s_k) / 4-D as the reference's 4-D bool keep-mask."""
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))


@pytest.mark.parametrize("path", ["autograd", "op"])
@pytest.mark.parametrize("case", ["per_kv_head", "causal_shared", "window_per_batch"])
def test_values_and_grads(rng, case, path):
    """Autograd through flash_attn_func(mask=) (eager twin) and the custom op (as torch.compile calls it) on
    the CPU backend: out and dq, dk, dv against the float64 torch reference with the same bits."""
    b, s_q, s_k, h, h_kv, d = 2, 37, 45, 4, 2, 32
    kw = {}
    mask = torch.from_numpy(rng.random((b, h_kv, s_q, s_k)) < 0.5)
    if case == "causal_shared":
        kw, mask = dict(causal=True), torch.from_numpy(rng.random((s_q, s_k)) < 0.7)
    elif case == "window_per_batch":
        kw, mask = dict(window_size=(9, 4)), torch.from_numpy(rng.random((b, 1, s_q, s_k)) < 0.6)
    q = torch.from_numpy(rng.standard_normal((b, s_q, h, d)).astype(np.float32)).requires_grad_()
    k, v = (torch.from_numpy(rng.standard_normal((b, s_k, h_kv, d)).astype(np.float32)).requires_grad_()
            for _ in range(2))
    dout = torch.from_numpy(rng.standard_normal((b, s_q, h, d)).astype(np.float32))
    if path == "op":
        out, _ = torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, d ** -0.5, kw.get("causal", False),
                                        *kw.get("window_size", (-1, -1)), 0.0, False, None, 128, 128,
                                        _bit_mask.pack(mask))
    else:
        out = fastattn.flash_attn_func(q, k, v, mask=mask, **kw)
    out.backward(dout)
    ref = _reference_grads(q, k, v, dout, causal=kw.get("causal", False), window=kw.get("window_size", (-1, -1)),
                           bits=_bits4(mask, b))
    lowp = [x.float().double() for x in ref]
    assert_close("out", out.detach().double().numpy(), ref[0].numpy(), lowp[0].numpy(), np.float32, FLOAT32_FLOOR)
    for name, g, r, lp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), ref[1:], lowp[1:]):
        assert_close(name, g.double().numpy(), r.numpy(), lp.numpy(), np.float32, FLOAT32_FLOOR)
    with torch.no_grad():  # the inference path: no autograd, the same bits
        again = fastattn.flash_attn_func(q, k, v, mask=mask, **kw)
    assert torch.equal(again, out.detach())


def test_compile_fullgraph_passes_the_bits_to_both_ops(rng):
    """torch.compile(fullgraph=True): fastattn::fwd and fastattn::bwd both get the packed bits; values and
    gradients equal eager ones bit for bit."""
    q = torch.from_numpy(rng.standard_normal((2, 32, 4, 32)).astype(np.float32)).requires_grad_()
    k, v = (torch.from_numpy(rng.standard_normal((2, 40, 2, 32)).astype(np.float32)).requires_grad_()
            for _ in range(2))
    mask = torch.from_numpy(rng.random((2, 2, 32, 40)) < 0.5)

    def model(q, k, v):
        return fastattn.flash_attn_func(q, k, v, causal=True, mask=mask).square().sum()

    backend, graphs = torch_reference.aot_graphs()
    torch._dynamo.reset()
    loss = torch.compile(model, fullgraph=True, backend=backend)(q, k, v)
    loss.backward()
    fwd_calls = torch_reference.op_calls(graphs["fw"][0], "fastattn.fwd")
    bwd_calls = torch_reference.op_calls(graphs["bw"][0], "fastattn.bwd")
    assert len(fwd_calls) == 1 and len(bwd_calls) == 1
    assert len(fwd_calls[0].args) == 19 and len(bwd_calls[0].args) == 22  # ..., block_q, block_k, bit_mask
    compiled = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    eager = model(q, k, v)
    eager.backward()
    assert torch.equal(loss, eager)
    for g, x in zip(compiled, (q, k, v)):
        assert torch.equal(g, x.grad)


def test_opcheck_with_bits(rng):
    q = torch.from_numpy(rng.standard_normal((1, 20, 2, 16)).astype(np.float32))
    k, v = (torch.from_numpy(rng.standard_normal((1, 24, 2, 16)).astype(np.float32)) for _ in range(2))
    bits = _bit_mask.pack(torch.from_numpy(rng.random((1, 2, 20, 24)) < 0.5))
    args = (None, None, None, None, 0, 0, 0.25, False, -1, -1, 0.0, False, None, 128, 128, bits)
    torch.library.opcheck(torch.ops.fastattn.fwd.default, (q, k, v) + args)
    out, lse = torch.ops.fastattn.fwd(q, k, v, *args)
    torch.library.opcheck(torch.ops.fastattn.bwd.default, (torch.randn_like(out), q, k, v, out, lse) + args)


@pytest.mark.skipif(not (torch.cuda.is_available() and fastattn.cuda_available()), reason="no CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_grads_with_a_mask(rng, dtype, causal):
    """The CUDA backward under an element mask (BitmaskBwdConfig) through torch autograd: dq, dk, dv against
    the float64 reference with the same bits, within FA3's rule (2x the low-precision reference's error
    plus the dtype's step), GQA with mask heads = heads_kv; rows the mask empties get dq = 0 exactly."""
    b, s_q, s_k, h, h_kv, d = 2, 300, 517, 4, 2, 128
    mask = torch.rand(b, h_kv, s_q, s_k, device="cuda") < 0.5
    mask[:, :, 250:] = False  # rows keeping nothing
    q = torch.randn(b, s_q, h, d, device="cuda", dtype=dtype, requires_grad=True)
    k, v = (torch.randn(b, s_k, h_kv, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(2))
    dout = torch.randn(b, s_q, h, d, device="cuda", dtype=dtype)
    out = fastattn.flash_attn_func(q, k, v, causal=causal, mask=mask)
    out.backward(dout)
    ref = _reference_grads(q, k, v, dout, causal=causal, bits=mask)
    low = torch_reference.lowp_backward(q, k, v, dout, dtype, causal=causal, bits=mask)
    step = 1 / 256 if dtype == torch.bfloat16 else 1 / 2048
    for name, g, r, lp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), ref[1:], low):
        err = (g.double() - r).abs().max().item()
        base = (lp - r).abs().max().item()
        assert err <= 2 * base + step * (r.abs().max().item() + 0.3), (name, err, base)
    assert (q.grad[:, 250:] == 0).all()


def test_varlen_without_max_seqlen_reads_host_cu_seqlens():
    """Varlen torch calls with max_seqlen 0 (unknown): on the CPU the longest sequence comes from cu_seqlens, so a
    mask narrower than the longest key sequence is refused (its words round up to 32 keys, which the C++ check
    cannot tell from a full mask; the missing keys would read as dropped), and a bias row of size 1 is
    broadcast to the longest query sequence, as with numpy arrays."""
    i32 = torch.int32
    q, k, v = torch.randn(12, 2, 8), torch.randn(15, 2, 8), torch.randn(15, 2, 8)
    cq, ck = torch.tensor([0, 5, 12], dtype=i32), torch.tensor([0, 9, 15], dtype=i32)  # 9 keys in sequence 0
    with pytest.raises(ValueError, match=r"^mask: its last dim \(keys\) is 6 but seqlen_k is 9"):
        fastattn.flash_attn_varlen_func(q, k, v, cq, ck, 0, 0, mask=torch.rand(7, 6) < 0.5)
    bias = torch.randn(1, 9)
    out, _ = fastattn.forward(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, bias=bias)
    want, _ = fastattn.forward(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, bias=bias.expand(7, 9).contiguous(),
                               max_seqlen_q=7, max_seqlen_k=9)
    assert torch.equal(out, want)
