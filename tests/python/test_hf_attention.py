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
# key), odd sizes, GQA and MQA; causal 1 < s_q < s_k without a mask is transformers' prefill into an
# empty static cache: keys past s_q are cut (its SDPA path's rule)
CASES = {
    "prefill_gqa": (2, 17, 17, 6, 2, True, 0.0),
    "decode": (1, 1, 113, 8, 2, True, 0.0),
    "static_prefill_sq_lt_sk": (1, 5, 33, 4, 1, True, 0.0),
    "softcap_full": (1, 13, 29, 2, 2, False, 4.0),
}


def test_autocast_as_the_sdpa_path(rng):
    """AMP training with fp32 weights: transformers hands the attention q and k in fp32 (RoPE's fp32 cos / sin
    promote the bf16 projections) and v in bf16, and its SDPA path leaves the cast to SDPA's autocast rule.
    attention_forward casts as SDPA does: out bf16 (as PyTorch's SDPA under autocast gives it), out and the
    gradients every element against float64 SDPA of the bf16-rounded inputs (FA3's rule, PyTorch's bf16 SDPA as
    the precision term), the gradients in their leaves' own dtypes."""
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def leaf(shape, dtype):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype).requires_grad_()
    q, k, v = leaf((2, 4, 13, 32), torch.float32), leaf((2, 2, 21, 32), torch.float32), leaf((2, 2, 21, 32), torch.bfloat16)
    dout = torch.from_numpy(rng.standard_normal((2, 13, 4, 32)).astype(np.float32)).to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None)
        assert out.dtype == sdpa(q.detach(), k.detach(), v.detach(), enable_gqa=True).dtype == torch.bfloat16
    out.backward(dout)
    # causal with s_q 13 < s_k 21 and no mask: keys past s_q are cut (transformers' rule, the module's docstring)
    base = [x.detach().to(torch.bfloat16) for x in (q, k[:, :, :13], v[:, :, :13])]
    ref_in = [x.double().requires_grad_() for x in base]
    low_in = [x.clone().requires_grad_() for x in base]
    want = sdpa(*ref_in, is_causal=True, enable_gqa=True).transpose(1, 2)
    lowp = sdpa(*low_in, is_causal=True, enable_gqa=True).transpose(1, 2)
    want.backward(dout.double())
    lowp.backward(dout)
    assert_close("out", np64(out), np64(want), np64(lowp), "bfloat16")
    for name, got, r, lo, dtype in zip(("dq", "dk", "dv"), (q, k, v), ref_in, low_in,
                                      (torch.float32, torch.float32, torch.bfloat16)):
        assert got.grad.dtype == dtype, name
        g = np64(got.grad)
        assert_close(name, g[:, :, :13], np64(r.grad), np64(lo.grad), "bfloat16")
        assert not np.any(g[:, :, 13:]), name  # keys past the cut (and no q rows there)


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
        if causal and 1 < s_q < s_k:
            k, v = k[:, :, :s_q], v[:, :, :s_q]
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
    for name in ("position_bias", "s_aux"):
        with pytest.raises(NotImplementedError, match=name):
            hf_attention.attention_forward(module, q, k, v, None, **{name: torch.zeros(1, 2, 8, 8)})
    with pytest.raises(NotImplementedError, match="attention_mask: expected transformers' 4-D"):
        hf_attention.attention_forward(module, q, k, v, torch.ones(1, 8, dtype=torch.bool))
    with pytest.raises(NotImplementedError, match="dropout"):
        hf_attention.attention_forward(module, q, k, v, None, dropout=0.1)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="sliding_window: expected None or an int >= 1"):
            hf_attention.attention_forward(module, q, k, v, None, sliding_window=bad)
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


def test_mask_plan_is_cached_per_tensor_and_version(rng, monkeypatch):
    """The value checks run once per mask tensor (transformers hands one to every layer, one per layer
    kind: alternating sliding and full masks stay cached); an in-place change (a new version) or another
    tensor is checked again."""
    q, k, v = (heads_first(rng, 2, 2, 9, 64, "cpu", "dense") for _ in range(3))
    module = types.SimpleNamespace(is_causal=True)
    keep = padded_causal((9, 4), 9, 9, True, "cpu")
    sliding = keep & torch.from_numpy(causal_window_keep(9, 9, 3))
    reads = []
    read_plan = hf_attention._hf_masks.read_plan
    monkeypatch.setattr(hf_attention._hf_masks, "read_plan", lambda *a: reads.append(a[0]) or read_plan(*a))
    bias = torch.from_numpy(rng.standard_normal(keep.shape).astype(np.float32)).masked_fill(~keep, float("-inf"))
    with torch.no_grad():
        first = [hf_attention.attention_forward(module, q, k, v, m)[0] for m in (keep, bias)]
        for _ in range(3):  # layers alternating between masks: the cached plans rebuild bits / bias
            again = [hf_attention.attention_forward(module, q, k, v, m)[0] for m in (keep, bias)]
            hf_attention.attention_forward(module, q, k, v, sliding, sliding_window=3)
            assert all(torch.equal(x, y) for x, y in zip(first, again))
        assert len(reads) == 3 and all(entry[2].mask is None and entry[2].bias is None for entry in hf_attention._recent)
        keep[1] = padded_causal((9,), 9, 9, True, "cpu")[0]  # in place: now exactly causal
        causal, _ = hf_attention.attention_forward(module, q, k, v, keep)
        assert len(reads) == 4 and hf_attention._recent[-1][2] == (True, (-1, -1), None, None)
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


def causal_window_keep(s_q, s_k, sliding_window):
    """transformers' sliding-window causal rule, queries the last s_q of s_k positions: i - j in [0, w)."""
    behind = np.arange(s_q)[:, None] + (s_k - s_q) - np.arange(s_k)[None, :]
    return (behind >= 0) & (behind < sliding_window)


# (b, h, h_kv, s_q, s_k, sliding_window or None, float bias mask): a window without a mask (prefill,
# decode against a longer cache), a float mask with real bias values and dropped entries (prefill, decode)
WINDOW_BIAS = {
    "window_prefill": (2, 4, 2, 17, 17, 5, False),
    "window_decode": (3, 4, 2, 1, 113, 17, False),
    "bias_prefill": (2, 4, 2, 17, 17, None, True),
    "bias_decode": (2, 2, 1, 1, 113, None, True),
}


@pytest.mark.parametrize("case", list(WINDOW_BIAS))
@pytest.mark.parametrize("device", DEVICES)
def test_sliding_window_and_float_bias(rng, device, case):
    """sliding_window (no mask) and a float mask with bias values (in q's dtype, the minimum and -inf
    masking), against the float64 reference of softmax(scale q k^T + add) v."""
    b, h, h_kv, s_q, s_k, window, with_bias = WINDOW_BIAS[case]
    d = D[device]
    q = heads_first(rng, b, h, s_q, d, device, "dense")
    k = heads_first(rng, b, h_kv, s_k, d, device, "dense")
    v = heads_first(rng, b, h_kv, s_k, d, device, "dense")
    add = np.zeros((b, 1, s_q, s_k))
    mask = None
    if window is not None:
        add = np.where(causal_window_keep(s_q, s_k, window), 0.0, -np.inf)[None, None]
    if with_bias:
        bias = (rng.standard_normal((b, 1, s_q, s_k)) * 2).astype(np.float32)
        bias[rng.random(bias.shape) < 0.2] = -np.inf
        mask = torch.from_numpy(bias).to(device, q.dtype)
        mask[:, :, :, :3] = torch.finfo(q.dtype).min  # transformers' fill value: masks as -inf does
        mask[0, 0, 0] = float("-inf")  # a fully masked row: 0
        add = np.where(np.isneginf(np64(mask)) | (np64(mask) <= torch.finfo(q.dtype).min), -np.inf, np64(mask))
    with torch.no_grad():
        out, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, mask,
                                                scaling=0.1, sliding_window=window)
    arrays = [np64(x.transpose(1, 2)) for x in (q, k, v)]
    ref64, _ = ref.forward(*arrays, scale=0.1, add=add)
    lowp, _ = ref.forward(*arrays, scale=0.1, add=add, dtype=RDT[device])
    assert_close("out", np64(out), ref64, lowp, RDT[device], FLOAT32_FLOOR if device == "cpu" else 0.0)
    if with_bias:
        assert torch.all(out[0, 0] == 0)


def test_blind_plan_reads_no_value(rng, monkeypatch):
    """read_mask_values = False (what CUDA-graph capture and torch.compile get): no value is read, a bool
    mask runs as bits, a float one as a bias; the same results as the checked plan's."""
    q, k, v = (heads_first(rng, 3, 2, 13, 64, "cpu", "dense") for _ in range(3))
    keep = padded_causal((13, 13, 5), 13, 13, True, "cpu")
    zero_min = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    module = types.SimpleNamespace(is_causal=True)
    with torch.no_grad():
        checked = [hf_attention.attention_forward(module, q, k, v, m)[0] for m in (keep, zero_min)]

        def no_read(*args):
            raise AssertionError("read_plan called")
        monkeypatch.setattr(hf_attention, "read_mask_values", False)
        monkeypatch.setattr(hf_attention._hf_masks, "read_plan", no_read)
        blind = [hf_attention.attention_forward(module, q, k, v, m)[0] for m in (keep, zero_min)]
    assert torch.equal(blind[0], checked[0])  # bits both ways
    torch.testing.assert_close(blind[1], checked[1], atol=1e-6, rtol=1e-6)  # bias (-inf) against bits


@pytest.mark.parametrize("form", ["bool", "bias"])
def test_compile_fullgraph_with_a_mask(rng, form):
    """torch.compile(fullgraph=True) over a masked call: no value is read while tracing (no graph break),
    the mask runs as bits / bias; the same values as eager on the live rows."""
    q, k, v = (heads_first(rng, 2, 2, 13, 64, "cpu", "dense") for _ in range(3))
    keep = padded_causal((13, 9), 13, 13, True, "cpu")
    mask = keep
    if form == "bias":
        mask = torch.from_numpy(rng.standard_normal(keep.shape).astype(np.float32)).masked_fill(
            ~keep, torch.finfo(torch.float32).min)
    module = types.SimpleNamespace(is_causal=True)
    compiled = torch.compile(lambda *a: hf_attention.attention_forward(module, *a)[0], fullgraph=True)
    with torch.no_grad():
        got, (want, _) = compiled(q, k, v, mask), hf_attention.attention_forward(module, q, k, v, mask)
    live = keep[:, 0].any(-1)
    torch.testing.assert_close(got[live], want[live], atol=1e-6, rtol=1e-6)


@pytest.mark.skipif(not CUDA, reason="no CUDA device: CUDA-graph capture not tested")
@pytest.mark.parametrize("form", ["bool", "bias"])
def test_cuda_graph_capture_with_a_mask(rng, form):
    """Capturing a forward with transformers' padded mask: no value is read (a sync would break the
    capture); the replay with new inputs gives the eager call's bits."""
    b, h, h_kv, s, d = 2, 4, 2, 113, 128
    q, k, v = (heads_first(rng, b, n, s, d, "cuda", "dense") for n in (h, h_kv, h_kv))
    keep = padded_causal((113, 40), s, s, True, "cuda")
    if form == "bool":
        mask = keep
    else:
        mask = torch.from_numpy(rng.standard_normal((b, 1, s, s)).astype(np.float32)).to("cuda", q.dtype)
        mask = mask.masked_fill(~keep, torch.finfo(q.dtype).min)
    module = types.SimpleNamespace(is_causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        hf_attention.attention_forward(module, q, k, v, mask)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out, _ = hf_attention.attention_forward(module, q, k, v, mask)
    for x in (q, k, v):
        x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        want, _ = hf_attention.attention_forward(module, q, k, v, mask)
        blind = hf_attention.attention(q, k, v, causal=False, with_lse=False, heads_first=True,
                                       **({"mask": keep} if form == "bool" else
                                          {"bias": hf_attention._hf_masks.blind_plan(mask, s, s).bias}))[0]
    assert torch.equal(out, blind)
    torch.testing.assert_close(out.float(), want.float(), atol=2e-2, rtol=2e-2)
