"""Element masks (mask=) with torch tensors: the bool mask is packed on its own device (int32 words,
the same bits as numpy's packing), and fastattn.forward / backward with a torch mask give the numpy
call's results bit for bit on the CPU backend. Skipped without torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch mask tests skipped")

import fastattn  # noqa: E402
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


def test_front_ends_take_a_torch_mask_without_autograd(rng):
    """flash_attn_func(mask=) and scaled_dot_product_attention(attn_mask=) with torch CPU tensors under
    no_grad: torch's own SDPA with the same boolean mask; with inputs that require grad: refused by name."""
    q = torch.from_numpy(rng.standard_normal((2, 4, 33, 32)).astype(np.float32))
    k, v = (torch.from_numpy(rng.standard_normal((2, 4, 47, 32)).astype(np.float32)) for _ in range(2))
    attn_mask = torch.from_numpy(rng.random((2, 1, 33, 47)) < 0.5)
    with torch.no_grad():
        out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=attn_mask)
        assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
        out_fa = fastattn.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask=attn_mask)
        assert torch.allclose(out_fa.transpose(1, 2).double(), want, atol=1e-5, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="mask: element masks run without autograd"):
        fastattn.flash_attn_func(q.transpose(1, 2).requires_grad_(), k.transpose(1, 2), v.transpose(1, 2), mask=attn_mask)
