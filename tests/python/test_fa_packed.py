"""flash_attn_qkvpacked_func / flash_attn_kvpacked_func (FA's packed inputs) against the float64
reference, with strided views of the packed arrays; wrong packing refused by name."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn


@pytest.mark.parametrize("b, s, h, d, causal", [(1, 1, 1, 32, False), (2, 17, 3, 64, True), (1, 113, 2, 32, True)])
def test_qkvpacked_matches_reference(rng, b, s, h, d, causal):
    qkv = randn(rng, (b, s, 3, h, d))
    out, lse = fastattn.flash_attn_qkvpacked_func(qkv, causal=causal, return_attn_probs=True)
    q, k, v = (qkv[:, :, i] for i in range(3))
    out64, lse64 = ref.forward(q, k, v, causal=causal)
    out32, _ = ref.forward(q, k, v, causal=causal, dtype=np.float32)
    assert_close("out", out, out64, out32, np.float32, floor=FLOAT32_FLOOR)
    assert_lse_close(lse, lse64)


@pytest.mark.parametrize("s_q, s_k, h, h_kv", [(1, 4097, 4, 1), (17, 113, 4, 2), (113, 17, 2, 2)])
def test_kvpacked_matches_reference(rng, s_q, s_k, h, h_kv):
    q, kv = randn(rng, (2, s_q, h, 32)), randn(rng, (2, s_k, 2, h_kv, 32))
    scale = 0.3
    out = fastattn.flash_attn_kvpacked_func(q, kv, softmax_scale=scale, causal=True, window_size=(5, 0))
    k, v = kv[:, :, 0], kv[:, :, 1]
    out64, _ = ref.forward(q, k, v, scale=scale, causal=True, window=(5, 0))
    out32, _ = ref.forward(q, k, v, scale=scale, causal=True, window=(5, 0), dtype=np.float32)
    assert_close("out", out, out64, out32, np.float32, floor=FLOAT32_FLOOR)


def test_packed_refusals(rng):
    q = randn(rng, (1, 5, 2, 32))
    with pytest.raises(ValueError, match="^qkv: expected shape"):
        fastattn.flash_attn_qkvpacked_func(randn(rng, (1, 5, 2, 2, 32)))
    with pytest.raises(ValueError, match="^kv: expected shape"):
        fastattn.flash_attn_kvpacked_func(q, randn(rng, (1, 5, 3, 2, 32)))
    with pytest.raises(ValueError, match="^kv: expected shape"):
        fastattn.flash_attn_kvpacked_func(q, randn(rng, (5, 2, 2, 32)))
    with pytest.raises(TypeError, match="^qkv: expected an array"):
        fastattn.flash_attn_qkvpacked_func([1, 2, 3])
    with pytest.raises(NotImplementedError, match="^num_heads_q"):
        fastattn.flash_attn_qkvpacked_func(randn(rng, (1, 5, 6, 32)), num_heads_q=4)
    with pytest.raises(NotImplementedError, match="^dropout_p"):
        fastattn.flash_attn_qkvpacked_func(randn(rng, (1, 5, 3, 2, 32)), dropout_p=0.1)
    with pytest.raises(TypeError):  # FA2's positional dropout_p would bind wrongly: keyword-only
        fastattn.flash_attn_kvpacked_func(q, randn(rng, (1, 5, 2, 2, 32)), 0.0)


def test_packed_torch_gradients_reach_packed_tensor(rng):
    """torch: the wrappers index views, so the packed tensor's gradient is the unpacked one's, restacked."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    qkv_np = randn(rng, (2, 17, 3, 2, 32))
    qkv = torch.tensor(qkv_np, requires_grad=True)
    fastattn.flash_attn_qkvpacked_func(qkv, causal=True).sum().backward()
    q, k, v = (torch.tensor(qkv_np[:, :, i], requires_grad=True) for i in range(3))
    fastattn.flash_attn_func(q, k, v, causal=True).sum().backward()
    want = torch.stack([q.grad, k.grad, v.grad], dim=2)
    torch.testing.assert_close(qkv.grad, want, rtol=0, atol=0)  # same kernel, same inputs: bitwise
