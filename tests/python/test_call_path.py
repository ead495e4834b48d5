"""The torch call paths give the same bits: eager inference runs the extension directly, eager
autograd its twin without the op (DirectAttention), torch.compile the fastattn::fwd custom op."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: call-path tests skipped")

import fastattn  # noqa: E402
from fastattn import interface  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and fastattn.cuda_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_direct_and_custom_op_agree(rng, device):
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    d = 64 if device == "cpu" else 128  # scripts/gpu-check-inference builds head dim 128 only
    q, k, v = (torch.from_numpy(rng.standard_normal((2, 33, 4, d)).astype(np.float32)).to(device, dtype)
               for _ in range(3))
    assert interface._eager_inference(torch, q, k, v)
    out_direct, lse_direct = fastattn.flash_attn_func(q, k, v, causal=True, window_size=(7, 0),
                                                      return_attn_probs=True)
    out_op, lse_op = torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, d ** -0.5, True, 7, 0, 0.0)
    assert torch.equal(out_direct, out_op) and torch.equal(lse_direct, lse_op)


def test_autograd_takes_the_custom_op(rng):
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 9, 2, 32)).astype(np.float32)).requires_grad_()
               for _ in range(3))
    assert not interface._eager_inference(torch, q, k, v)
    out = fastattn.flash_attn_func(q, k, v, causal=True)
    assert out.grad_fn is not None
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    with torch.no_grad():
        assert interface._eager_inference(torch, q, k, v)
        assert fastattn.flash_attn_func(q, k, v, causal=True).grad_fn is None


@pytest.mark.parametrize("deterministic", [False, True])
def test_direct_autograd_and_custom_op_agree(rng, deterministic):
    q, k, v = (torch.from_numpy(rng.standard_normal((2, 17, h, 32)).astype(np.float32))
               for h in (4, 2, 2))
    dout = torch.from_numpy(rng.standard_normal((2, 17, 4, 32)).astype(np.float32))
    grads = []
    for run in ("direct", "op"):
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        if run == "direct":
            assert interface._torch_path(torch, qg, kg, vg) == "autograd"
            out = fastattn.flash_attn_func(qg, kg, vg, causal=True, deterministic=deterministic)
            assert type(out.grad_fn).__name__ == "DirectAttentionBackward"
        else:
            out, _ = torch.ops.fastattn.fwd(qg, kg, vg, None, None, None, None, 0, 0, 32 ** -0.5, True,
                                            -1, 0, 0.0, deterministic)
        out.backward(dout)
        grads.append((out.detach(), qg.grad, kg.grad, vg.grad))
    for a, b in zip(*grads):
        assert torch.isfinite(a).all() and torch.equal(a, b)
