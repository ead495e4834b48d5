"""fastattn.hf_attention (transformers' attention interface) and the heads-first torch path it and
the SDPA drop-in take: (b, h, s, d) tensors read as they lie, no transpose call. Values against the
float64 reference, the same bits as flash_attn_func on the transposed tensors, refusals by name."""
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: transformers-attention tests skipped")

import attn_reference as ref  # noqa: E402
import fastattn  # noqa: E402
from checks import FLOAT32_FLOOR, assert_close  # noqa: E402
from fastattn import _torch_views, hf_attention  # noqa: E402

CUDA = torch.cuda.is_available() and fastattn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
D = {"cpu": 64, "cuda": 128}  # scripts/gpu-check-inference builds head dim 128 only
DTYPE = {"cpu": torch.float32, "cuda": torch.bfloat16}
RDT = {"cpu": np.float32, "cuda": "bfloat16"}


def heads_first(rng, b, h, s, d, device, how):
    """A (b, h, s, d) tensor laid out `how`: dense (transformers' cache), from a (b, s, h, d)
    buffer (a projection's output transposed), or with a non-unit last stride (copied)."""
    def draw(shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(device, DTYPE[device])
    if how == "dense":
        return draw((b, h, s, d))
    if how == "from_bshd":
        return draw((b, s, h, d)).transpose(1, 2)
    assert how == "last_strided"
    return draw((b, h, s, 2 * d))[..., ::2]


def np64(x):
    return x.detach().to(torch.float64).cpu().numpy()


# (b, s_q, s_k, h, h_kv, causal, softcap): prefill, decode (one query, bottom-right causal: every
# key), odd sizes, GQA and MQA
CASES = {
    "prefill_gqa": (2, 17, 17, 6, 2, True, 0.0),
    "decode": (1, 1, 113, 8, 2, True, 0.0),
    "chunk_sq_lt_sk": (1, 5, 33, 4, 1, True, 0.0),
    "softcap_full": (1, 13, 29, 2, 2, False, 4.0),
}


@pytest.mark.parametrize("how", ["dense", "from_bshd", "last_strided"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("device", DEVICES)
def test_values_against_reference_and_flash_attn_func(rng, device, case, how):
    b, s_q, s_k, h, h_kv, causal, softcap = CASES[case]
    d = D[device]
    q = heads_first(rng, b, h, s_q, d, device, how)
    k = heads_first(rng, b, h_kv, s_k, d, device, how)
    v = heads_first(rng, b, h_kv, s_k, d, device, how)
    module = types.SimpleNamespace(is_causal=causal)
    scale = 0.7 * d ** -0.5
    with torch.no_grad():
        out, weights = hf_attention.attention_forward(module, q, k, v, None, scaling=scale,
                                                      softcap=softcap or None)
        same = fastattn.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                        softmax_scale=scale, causal=causal, softcap=softcap)
    assert weights is None and out.shape == (b, s_q, h, d) and out.dtype == q.dtype
    assert torch.equal(out, same)
    arrays = [np64(x.transpose(1, 2)) for x in (q, k, v)]
    kw = dict(scale=scale, causal=causal, softcap=softcap)
    ref64, _ = ref.forward(*arrays, **kw)
    lowp, _ = ref.forward(*arrays, dtype=RDT[device], **kw)
    assert_close("out", np64(out), ref64, lowp, RDT[device], FLOAT32_FLOOR if device == "cpu" else 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_module_is_causal_is_the_default(rng, device):
    d = D[device]
    q, k, v = (heads_first(rng, 1, 2, 9, d, device, "dense") for _ in range(3))
    with torch.no_grad():
        causal, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None)
        full, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=False), q, k, v, None)
        no_attr, _ = hf_attention.attention_forward(object(), q, k, v, None)
        override, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None,
                                                     is_causal=False)
    assert torch.equal(no_attr, causal) and torch.equal(override, full) and not torch.equal(causal, full)


def test_autograd_through_the_heads_first_path(rng):
    q, k, v = (heads_first(rng, 2, 4, 11, 64, "cpu", "dense").requires_grad_() for _ in range(3))
    out, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None)
    dout = torch.from_numpy(rng.standard_normal(out.shape).astype(np.float32))
    out.backward(dout)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    twin = fastattn.flash_attn_func(*(x.transpose(1, 2) for x in leaves), causal=True)
    twin.backward(dout)
    assert torch.equal(out, twin)
    for got, want in zip((q.grad, k.grad, v.grad), (x.grad for x in leaves)):
        assert torch.equal(got, want)


def test_refusals_name_the_argument(rng):
    q, k, v = (heads_first(rng, 1, 2, 8, 64, "cpu", "dense") for _ in range(3))
    module = types.SimpleNamespace(is_causal=True)
    bias = torch.zeros(1, 1, 8, 8)
    bias[0, 0, 2, 1] = -0.5  # a real additive bias: not 0 / the dtype's minimum
    with pytest.raises(NotImplementedError, match="attention_mask: a float mask with values other than 0"):
        hf_attention.attention_forward(module, q, k, v, bias)
    with pytest.raises(NotImplementedError, match="attention_mask: expected transformers' 4-D"):
        hf_attention.attention_forward(module, q, k, v, torch.ones(1, 8, dtype=torch.bool))
    with pytest.raises(NotImplementedError, match="dropout"):
        hf_attention.attention_forward(module, q, k, v, None, dropout=0.1)
    with pytest.raises(NotImplementedError, match="sliding_window"):
        hf_attention.attention_forward(module, q, k, v, None, sliding_window=4)
    with pytest.raises(ValueError, match=r"query: expected 4 dimensions \(batch, heads, seqlen"):
        hf_attention.attention_forward(module, q[0], k, v, None)
    with pytest.raises(ValueError, match="heads_first: fixed-length"):
        cu = torch.tensor([0, 8], dtype=torch.int32)
        fastattn.interface.attention(q[0], k[0], v[0], (cu, cu, None, None), (8, 8), heads_first=True)


@pytest.mark.parametrize("how", ["dense", "from_bshd", "last_strided"])
def test_heads_first_view_is_the_transposed_view(rng, how):
    t = heads_first(rng, 2, 3, 5, 64, "cpu", how)
    got, want = _torch_views.view(t, heads_first=True), _torch_views.view(t.transpose(1, 2))
    owner = got[5]  # t, or its copy with a unit last stride
    assert (owner is t) == (how != "last_strided") and torch.equal(owner, t)
    sb, sh, ss, sd = owner.stride()
    assert got[0] == owner.data_ptr() and tuple(got[1]) == tuple(want[1]) == (2, 5, 3, 64)
    assert tuple(got[2]) == (sb, ss, sh, sd) and sd == 1 and got[3:5] == want[3:5]
    if how != "last_strided":  # no copy: exactly the transposed tensor's view
        assert got[0] == want[0] and tuple(got[2]) == tuple(want[2])
    resolved = _torch_views.view(torch._neg_view(t), heads_first=True)
    assert not resolved[5].is_neg() and torch.equal(resolved[5], -t)


def test_register_with_transformers():
    pytest.importorskip("transformers", reason="transformers is not installed: registration not tested")
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    hf_attention.register("fastattn_test")
    assert AttentionInterface()["fastattn_test"] is hf_attention.attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS["fastattn_test"] is sdpa_mask


def padded_causal(lengths, s_q, s_k, left, device):
    """transformers' padded causal mask (b, 1, s_q, s_k), True = attend: bottom-right causal (the
    queries are the last s_q positions) AND the key is a real token."""
    rows = torch.arange(s_q, device=device)[:, None] + (s_k - s_q)
    cols = torch.arange(s_k, device=device)[None, :]
    n = torch.tensor(lengths, device=device)[:, None]
    keys = torch.arange(s_k, device=device)[None, :]
    real = keys >= s_k - n if left else keys < n
    return ((cols <= rows)[None] & real[:, None, :])[:, None]


# (b, h, h_kv, s_q, s_k, lengths, left padding)
PADDED = {
    "prefill_left": (3, 4, 2, 17, 17, (17, 9, 1), True),
    "prefill_right": (2, 2, 2, 33, 33, (20, 33), False),
    "chunk_left": (2, 4, 1, 5, 37, (37, 12), True),
    "decode_left": (3, 2, 2, 1, 113, (113, 40, 7), True),
}


@pytest.mark.parametrize("form", ["bool", "float"])
@pytest.mark.parametrize("case", list(PADDED))
@pytest.mark.parametrize("device", DEVICES)
def test_padded_batch_against_sdpa_and_reference(rng, device, case, form):
    """A padded batch with transformers' 4-D mask (bool, or float 0 / the dtype's minimum as its eager
    path builds it) against torch's SDPA with the same mask and the float64 reference; queries that keep
    no key give 0 (SDPA gives NaN there: those rows are not compared with it)."""
    b, h, h_kv, s_q, s_k, lengths, left = PADDED[case]
    d = D[device]
    q = heads_first(rng, b, h, s_q, d, device, "dense")
    k = heads_first(rng, b, h_kv, s_k, d, device, "dense")
    v = heads_first(rng, b, h_kv, s_k, d, device, "dense")
    keep = padded_causal(lengths, s_q, s_k, left, device)
    mask = keep if form == "bool" else torch.zeros(keep.shape, dtype=q.dtype, device=device).masked_fill(
        ~keep, torch.finfo(q.dtype).min)
    scale = 0.7 * d ** -0.5
    with torch.no_grad():
        out, weights = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, mask,
                                                      scaling=scale)
        group = h // h_kv
        want = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float().repeat_interleave(group, 1), v.float().repeat_interleave(group, 1),
            attn_mask=keep, scale=scale).transpose(1, 2)
    assert weights is None and out.shape == (b, s_q, h, d) and out.dtype == q.dtype
    dead = ~keep[:, 0].any(-1)  # (b, s_q): queries that see no key
    assert torch.all(out[dead] == 0)
    live = ~dead
    tol = 1e-4 if device == "cpu" else 2e-2
    torch.testing.assert_close(out[live].float(), want[live], atol=tol, rtol=tol)
    arrays = [np64(x.transpose(1, 2)) for x in (q, k, v)]
    blocks = (np.broadcast_to(keep.cpu().numpy(), (b, h, s_q, s_k)), 1, 1)
    ref64, _ = ref.forward(*arrays, scale=scale, blocks=blocks)
    lowp, _ = ref.forward(*arrays, scale=scale, blocks=blocks, dtype=RDT[device])
    assert_close("out", np64(out), ref64, lowp, RDT[device], FLOAT32_FLOOR if device == "cpu" else 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_causal_mask_takes_the_native_path(rng, device):
    """An unpadded causal mask (as the eager / older paths pass one) gives the same bits as no mask."""
    d = D[device]
    q, k, v = (heads_first(rng, 2, 2, 19, d, device, "dense") for _ in range(3))
    keep = padded_causal((19, 19), 19, 19, True, device)
    with torch.no_grad():
        native, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None)
        for mask in (keep, torch.zeros(keep.shape, device=device).masked_fill(~keep, float("-inf"))):
            got, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=False), q, k, v, mask)
            assert torch.equal(got, native)


def test_mask_plan_is_cached_per_tensor_and_version(rng):
    """The value checks run once per mask tensor (transformers hands one to every layer); an in-place
    change (a new version) or another tensor is checked again."""
    q, k, v = (heads_first(rng, 2, 2, 9, 64, "cpu", "dense") for _ in range(3))
    module = types.SimpleNamespace(is_causal=True)
    keep = padded_causal((9, 4), 9, 9, True, "cpu")
    with torch.no_grad():
        first, _ = hf_attention.attention_forward(module, q, k, v, keep)
        plan = hf_attention._last["plan"]
        again, _ = hf_attention.attention_forward(module, q, k, v, keep)
        assert hf_attention._last["plan"] is plan and torch.equal(first, again)
        keep[1] = padded_causal((9,), 9, 9, True, "cpu")[0]  # in place: now exactly causal
        causal, _ = hf_attention.attention_forward(module, q, k, v, keep)
        assert hf_attention._last["plan"] == (True, None)
        native, _ = hf_attention.attention_forward(module, q, k, v, None)
    assert torch.equal(causal, native)


def test_padded_batch_gradients_against_sdpa(rng):
    """Training with a padded batch on CPU tensors: the autograd path applies the same bits in the
    backward (gradients of the real queries' outputs against SDPA's)."""
    b, h, s = 2, 2, 13
    q, k, v = (heads_first(rng, b, h, s, 64, "cpu", "dense").requires_grad_() for _ in range(3))
    keep = padded_causal((13, 6), s, s, True, "cpu")
    out, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, keep)
    live = keep[:, 0].any(-1)
    dout = torch.from_numpy(rng.standard_normal(out.shape).astype(np.float32)) * live[:, :, None, None]
    out.backward(dout)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    # SDPA gives NaN for queries that keep no key; there it keeps every key instead (finite), and the
    # zero dout of those rows leaves dk, dv untouched and their dq 0, as fastattn's
    finite = keep | ~live[:, None, :, None]
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=finite).transpose(1, 2)
    want = want * live[:, :, None, None]
    want.backward(dout)
    torch.testing.assert_close(out, want, atol=2e-5, rtol=2e-5)
    for got, ref_grad in zip((q.grad, k.grad, v.grad), (x.grad for x in leaves)):
        torch.testing.assert_close(got, ref_grad, atol=2e-5, rtol=2e-5)
