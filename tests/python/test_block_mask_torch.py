"""Block-sparse masks through torch on the CPU backend: values and autograd gradients against the
float64 torch reference (every path: inference, eager autograd, the custom op, torch.compile with
fullgraph=True), gradcheck, and FlexAttention BlockMask conversion with its refusal case."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch block-mask tests skipped")

import fastattn  # noqa: E402
import torch_reference  # noqa: E402
from checks import FLOAT32_FLOOR, assert_close  # noqa: E402


def rand(rng, shape, dtype=torch.float32, requires_grad=False):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    return x.requires_grad_(requires_grad)


def blocks(rng, shape, density=0.5):
    return torch.from_numpy(rng.random(shape) < density)


def np64(x):
    return x.detach().to(torch.float64).numpy()


def _reference_grads(q, k, v, dout, **kw):
    """(out, dq, dk, dv) in float64 by autograd through the torch reference."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    out = torch_reference.attention(*leaves, **kw)
    out.backward(dout.double())
    return out.detach(), *(x.grad for x in leaves)


def _check(out, grads, ref):
    lowp = [x.float().double() for x in ref]  # float32 inputs: the float64 result rounded
    assert_close("out", np64(out), ref[0].numpy(), lowp[0].numpy(), np.float32, FLOAT32_FLOOR)
    for name, g, r, lp in zip(("dq", "dk", "dv"), grads, ref[1:], lowp[1:]):
        assert_close(name, np64(g), r.numpy(), lp.numpy(), np.float32, FLOAT32_FLOOR)


@pytest.mark.parametrize("path", ["autograd", "op"])
@pytest.mark.parametrize("case", ["gqa_per_kv_head", "causal_shared", "window_uint8_transposed"])
def test_values_and_grads(rng, case, path):
    b, s_q, s_k, h, h_kv, d = 2, 37, 45, 4, 2, 32
    kw, size = {}, (16, 8)
    mask = blocks(rng, (b, h_kv, 3, 6))
    if case == "causal_shared":
        kw, mask = dict(causal=True), blocks(rng, (1, 1, 3, 6), 0.7)
    elif case == "window_uint8_transposed":
        kw = dict(window_size=(9, 4))
        mask = blocks(rng, (b, 1, 6, 3)).to(torch.uint8).mul(3).transpose(2, 3)  # strided view, nonzero 3
    q = rand(rng, (b, s_q, h, d), requires_grad=True)
    k, v = (rand(rng, (b, s_k, h_kv, d), requires_grad=True) for _ in range(2))
    dout = rand(rng, (b, s_q, h, d))
    if path == "op":  # a tensor subclass-free way into the custom op: call it as torch.compile would
        scale = d ** -0.5
        out, _ = torch.ops.fastattn.fwd(q, k, v, None, None, None, None, 0, 0, scale, kw.get("causal", False),
                                        *kw.get("window_size", (-1, -1)), 0.0, False, mask, *size)
    else:
        out = fastattn.flash_attn_func(q, k, v, block_mask=mask, block_size=size, **kw)
    out.backward(dout)
    rkw = dict(causal=kw.get("causal", False), window=kw.get("window_size", (-1, -1)), blocks=(mask, *size))
    _check(out, [x.grad for x in (q, k, v)], _reference_grads(q, k, v, dout, **rkw))
    with torch.no_grad():  # the inference path: no autograd, the same bits
        again = fastattn.flash_attn_func(q, k, v, block_mask=mask, block_size=size, **kw)
    assert torch.equal(again, out.detach())


def test_varlen_grads(rng):
    cu_q, cu_k = (torch.tensor(c, dtype=torch.int32) for c in ([0, 20, 20, 37], [0, 25, 30, 30]))
    q = rand(rng, (37, 2, 16), requires_grad=True)
    k, v = (rand(rng, (30, 1, 16), requires_grad=True) for _ in range(2))
    mask = blocks(rng, (3, 1, 3, 4), 0.6)
    out = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 20, 25, causal=True, block_mask=mask,
                                          block_size=(8, 8))
    dout = rand(rng, out.shape)
    out.backward(dout)
    for b in range(3):  # each sequence against the reference on its own
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0:
            continue
        if k1 == k0:
            assert (out[q0:q1] == 0).all() and (q.grad[q0:q1] == 0).all()
            continue
        ref = _reference_grads(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], dout[None, q0:q1], causal=True,
                               blocks=(mask[b:b + 1], 8, 8))
        _check(out[None, q0:q1], [q.grad[None, q0:q1], k.grad[None, k0:k1], v.grad[None, k0:k1]], ref)


def test_gradcheck(rng):
    """torch.autograd.gradcheck of the masked CPU backend (float32 tolerances, as test_torch's)."""
    q = rand(rng, (1, 7, 2, 8), requires_grad=True)
    k, v = (rand(rng, (1, 9, 1, 8), requires_grad=True) for _ in range(2))
    mask = torch.tensor([[[[1, 0, 1], [0, 1, 1]]]], dtype=torch.bool)  # blocks of 4 x 3

    def fn(q, k, v):
        return fastattn.flash_attn_func(q, k, v, window_size=(6, 2), block_mask=mask, block_size=(4, 3))
    with pytest.warns(UserWarning, match="double precision"):
        assert torch.autograd.gradcheck(fn, (q, k, v), eps=2e-3, atol=2e-3, rtol=2e-2)


def test_compile_fullgraph_passes_the_mask_to_both_ops(rng):
    """torch.compile(fullgraph=True): fastattn::fwd and fastattn::bwd both get the block mask; values
    and gradients equal eager ones bit for bit."""
    q = rand(rng, (2, 32, 4, 32), requires_grad=True)
    k, v = (rand(rng, (2, 40, 2, 32), requires_grad=True) for _ in range(2))
    mask = blocks(rng, (2, 2, 2, 5))

    def model(q, k, v):
        return fastattn.flash_attn_func(q, k, v, causal=True, block_mask=mask, block_size=(16, 8)).square().sum()

    backend, graphs = torch_reference.aot_graphs()
    torch._dynamo.reset()
    loss = torch.compile(model, fullgraph=True, backend=backend)(q, k, v)
    loss.backward()
    fwd_calls = torch_reference.op_calls(graphs["fw"][0], "fastattn.fwd")
    bwd_calls = torch_reference.op_calls(graphs["bw"][0], "fastattn.bwd")
    assert len(fwd_calls) == 1 and len(bwd_calls) == 1
    assert len(fwd_calls[0].args) == 18 and len(bwd_calls[0].args) == 21  # block_mask, block_q, block_k passed
    assert tuple(bwd_calls[0].args[-2:]) == (16, 8)
    compiled = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    eager = model(q, k, v)
    eager.backward()
    assert torch.equal(loss, eager)
    for g, x in zip(compiled, (q, k, v)):
        assert torch.equal(g, x.grad)


def test_opcheck_with_mask(rng):
    q = rand(rng, (1, 20, 2, 16))
    k, v = rand(rng, (1, 24, 2, 16)), rand(rng, (1, 24, 2, 16))
    args = (None, None, None, None, 0, 0, 0.25, False, -1, -1, 0.0, False, blocks(rng, (1, 2, 3, 3)), 8, 8)
    torch.library.opcheck(torch.ops.fastattn.fwd.default, (q, k, v) + args)
    out, lse = torch.ops.fastattn.fwd(q, k, v, *args)
    torch.library.opcheck(torch.ops.fastattn.bwd.default, (torch.randn_like(out), q, k, v, out, lse) + args)


def test_mask_must_be_a_torch_tensor(rng):
    q = rand(rng, (1, 8, 2, 16))
    with pytest.raises(TypeError, match="^block_mask: expected a torch array like q"):
        fastattn.flash_attn_func(q, q, q, block_mask=np.ones((1, 1, 1, 1), bool), block_size=8)
    with pytest.raises(ValueError, match="^block_mask: expected dtype bool or uint8"):
        fastattn.flash_attn_func(q, q, q, block_mask=torch.ones(1, 1, 1, 1), block_size=8)


# --- FlexAttention BlockMask ------------------------------------------------------------------

flex = pytest.importorskip("torch.nn.attention.flex_attention", reason="no FlexAttention in this torch")


def _block_causal(b, h, q_idx, kv_idx):  # constant on every 64 x 64 block
    return (q_idx // 64) >= (kv_idx // 64)


def test_flex_block_mask_of_full_blocks_is_taken(rng):
    q = rand(rng, (2, 128, 4, 32), requires_grad=True)
    k, v = (rand(rng, (2, 192, 2, 32), requires_grad=True) for _ in range(2))
    bm = flex.create_block_mask(_block_causal, 2, 4, 128, 192, device="cpu", BLOCK_SIZE=64)
    assert bool((bm.kv_num_blocks == 0).all())  # every kept block is full
    out = fastattn.flash_attn_func(q, k, v, block_mask=bm)
    dense = bm.to_dense() != 0
    same = fastattn.flash_attn_func(q, k, v, block_mask=dense, block_size=64)
    assert torch.equal(out, same)
    dout = rand(rng, out.shape)
    out.backward(dout)
    _check(out, [x.grad for x in (q, k, v)], _reference_grads(q, k, v, dout, blocks=(dense, 64, 64)))


def test_flex_block_mask_with_noop_mask_mod_is_taken(rng):
    """A BlockMask built from kept blocks alone (mask_mod None: the no-op) keeps its partial blocks whole."""
    q, k, v = (rand(rng, (1, 64, 2, 16)) for _ in range(3))
    kv_num = torch.tensor([[[1, 2]]], dtype=torch.int32)
    kv_idx = torch.tensor([[[[1, 0], [0, 1]]]], dtype=torch.int32)
    bm = flex.BlockMask.from_kv_blocks(kv_num, kv_idx, BLOCK_SIZE=32)
    out = fastattn.flash_attn_func(q, k, v, block_mask=bm)
    dense = torch.tensor([[[[False, True], [True, True]]]])
    assert torch.equal(out, fastattn.flash_attn_func(q, k, v, block_mask=dense, block_size=32))


@pytest.mark.parametrize("lengths", [(128, 128), (100, 160)], ids=["element_mask_mod", "ragged_edge"])
def test_flex_block_mask_needing_its_mask_mod_is_refused(rng, lengths):
    s_q, s_k = lengths

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    mask_mod = causal if lengths == (128, 128) else _block_causal
    bm = flex.create_block_mask(mask_mod, 1, 1, s_q, s_k, device="cpu", BLOCK_SIZE=64)
    q, k, v = rand(rng, (1, s_q, 2, 16)), rand(rng, (1, s_k, 2, 16)), rand(rng, (1, s_k, 2, 16))
    with pytest.raises(ValueError, match=r"^block_mask: .*mask_mod \(" + mask_mod.__name__ + r"\).*cannot evaluate"):
        fastattn.flash_attn_func(q, k, v, block_mask=bm)


def test_flex_block_size_must_agree(rng):
    bm = flex.create_block_mask(_block_causal, 1, 1, 128, 128, device="cpu", BLOCK_SIZE=64)
    q = rand(rng, (1, 128, 1, 16))
    with pytest.raises(ValueError, match="^block_size: .*differs from the FlexAttention BlockMask's BLOCK_SIZE"):
        fastattn.flash_attn_func(q, q, q, block_mask=bm, block_size=(32, 32))


def test_dlpack_path_matches_the_front_end(rng):
    """fastattn.forward / backward (DLPack, no autograd) with a torch mask: the same bits as flash_attn_func."""
    q, dout = rand(rng, (2, 30, 4, 16)), rand(rng, (2, 30, 4, 16))
    k, v = rand(rng, (2, 33, 2, 16)), rand(rng, (2, 33, 2, 16))
    mask = blocks(rng, (2, 4, 4, 5))
    out, lse = fastattn.forward(q, k, v, causal=True, block_mask=mask, block_size=(8, 7))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    front = fastattn.flash_attn_func(*leaves, causal=True, block_mask=mask, block_size=(8, 7))
    front.backward(dout)
    assert torch.equal(out, front.detach())
    grads = fastattn.backward(dout, q, k, v, out, lse, causal=True, block_mask=mask, block_size=(8, 7))
    for g, x in zip(grads, leaves):
        assert torch.equal(g, x.grad)
