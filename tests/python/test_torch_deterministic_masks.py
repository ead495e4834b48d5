"""torch.use_deterministic_algorithms(True) reaches fastattn's backward on every torch path that replaces
PyTorch's SDPA: scaled_dot_product_attention with a bool or float attn_mask and hf_attention (transformers'
attention interface), as it did already for SDPA without a mask. Review s40: the mask paths and hf_attention
called attention() without the flag, so on CUDA their backward accumulated dq (and dk / dv under GQA) in
atomic order while PyTorch promised bitwise-reproducible gradients (or an error). The CPU backward is ordered
either way, so the tests record the flag that attention() receives instead of comparing gradients."""
import types

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import fastattn  # noqa: E402
from fastattn import hf_attention, sdpa  # noqa: E402


@pytest.fixture
def seen_flags(monkeypatch):
    """attention() in sdpa and hf_attention wrapped: each call's deterministic keyword is appended."""
    flags = []
    for module in (sdpa, hf_attention):
        real = module.attention

        def recording(*args, _real=real, **kwargs):
            flags.append(kwargs.get("deterministic", False))
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, "attention", recording)
    return flags


@pytest.fixture
def deterministic_torch():
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was)


def bhsd(b=2, h=4, h_kv=2, s_q=17, s_k=17, d=32):
    draw = lambda *shape: torch.randn(*shape, dtype=torch.float32, requires_grad=True)  # noqa: E731
    return draw(b, h, s_q, d), draw(b, h_kv, s_k, d), draw(b, h_kv, s_k, d)


@pytest.mark.parametrize("form", ["none", "bool", "float"])
def test_sdpa_paths_carry_the_flag(seen_flags, deterministic_torch, form):
    q, k, v = bhsd()
    keep = torch.rand(2, 1, 17, 17) < 0.7
    keep[..., 0] = True
    mask = {"none": None, "bool": keep, "float": torch.where(keep, 0.0, float("-inf"))}[form]
    out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    out.sum().backward()
    assert seen_flags == [True]


@pytest.mark.parametrize("form", ["none", "bool", "float_bias"])
def test_hf_attention_carries_the_flag(seen_flags, deterministic_torch, form):
    q, k, v = bhsd()
    keep = torch.ones(2, 1, 17, 17, dtype=torch.bool).tril()
    keep[0, :, :, :3] = False  # a padded batch entry: the plan keeps a mask
    mask = {"none": None, "bool": keep, "float_bias": torch.where(keep, torch.rand(2, 1, 17, 17), float("-inf"))}[form]
    out, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, mask, scaling=0.2)
    out.sum().backward()
    assert seen_flags == [True]


def test_flag_off_stays_off(seen_flags):
    """Without the global switch the default (atomic, faster) backward stays: the flag is False."""
    assert not torch.are_deterministic_algorithms_enabled()
    q, k, v = bhsd()
    fastattn.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(17, 17, dtype=torch.bool), enable_gqa=True)
    hf_attention.attention_forward(types.SimpleNamespace(is_causal=True), q, k, v, None)
    assert seen_flags == [False, False]


def cuda_qkv(seed, b, h, s, d):
    """bf16 q, k, v on the GPU requiring grad, and the CPU generator that drew them (skips without a device)."""
    if not (torch.cuda.is_available() and fastattn.cuda_available()):
        pytest.skip("no CUDA device")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(b, h, s, d, generator=gen).to("cuda", torch.bfloat16).requires_grad_() for _ in range(3)], gen


def grads_under(switch, forward, tensors):
    """The gradients of `tensors` from forward()'s backward with torch.use_deterministic_algorithms(True, **switch)
    (None: the switch off), the switch off again afterwards; the tensors' grads are cleared for the next run."""
    if switch is not None:
        torch.use_deterministic_algorithms(True, **switch)
    try:
        forward().float().sum().backward()
    finally:
        torch.use_deterministic_algorithms(False)
    grads = [x.grad.clone() for x in tensors]
    for x in tensors:
        x.grad = None
    return grads


def test_cuda_float_mask_under_deterministic_refuses_at_backward():
    """CUDA (device only): with the switch on, a bool attn_mask's backward runs (the ordered dQ) and gives the
    gradients of the default mode up to rounding; a float one (the bias) runs forward and is refused by name at
    the backward, as docs/python.md says (the bias backward has no deterministic mode yet)."""
    (q, k, v), gen = cuda_qkv(7, 2, 4, 300, 128)
    keep = (torch.rand(2, 1, 300, 300, generator=gen) < 0.8).to("cuda")
    keep[..., 0] = True
    run = lambda: fastattn.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # noqa: E731
    for a, b in zip(grads_under(None, run, (q, k, v)), grads_under({}, run, (q, k, v))):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
    bias = torch.where(keep, 0.5, float("-inf")).to(torch.bfloat16)
    torch.use_deterministic_algorithms(True)
    try:
        out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        with pytest.raises(NotImplementedError, match="deterministic"):
            out.float().sum().backward()
    finally:
        torch.use_deterministic_algorithms(False)


def test_cuda_float_mask_under_warn_only_warns_and_runs():
    """CUDA (device only): torch.use_deterministic_algorithms(True, warn_only=True) with a float attn_mask warns
    that the bias backward is not ordered and runs it in the default mode (PyTorch's warn_only rule), giving the
    gradients of the switch-off run up to rounding."""
    (q, k, v), gen = cuda_qkv(11, 1, 4, 113, 128)
    bias = (torch.randn(1, 4, 113, 113, generator=gen) * 0.5).to("cuda", torch.bfloat16)
    run = lambda: fastattn.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # noqa: E731

    def warned_run():
        with pytest.warns(UserWarning, match="no deterministic"):
            return run()

    plain = grads_under(None, run, (q, k, v))
    for a, b in zip(plain, grads_under({"warn_only": True}, warned_run, (q, k, v))):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
