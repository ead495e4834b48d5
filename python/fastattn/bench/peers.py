"""The implementations compared: fastattn, PyTorch SDPA backends, FlexAttention, numpy.

A peer is a name and a `prepare(case, inputs)` that returns a no-argument callable running one
forward, or raises (NotImplementedError for cases it cannot express); the runner records the
failure and carries on. Callables whose output is (b, h, s, d) carry `layout = "bhsd"`.
"""
from __future__ import annotations

import numpy as np

import fastattn


def _fastattn(case, x):
    q, k, v = x["bshd"]
    return lambda: fastattn.flash_attn_func(q, k, v, causal=case.causal, window_size=case.window)


def _sdpa_with(backend_name):
    def prepare(case, x):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if case.window != (-1, -1):
            raise NotImplementedError("SDPA has no sliding-window mask (only attn_mask)")
        if case.causal and case.s_q != case.s_k:
            raise NotImplementedError("SDPA's causal mask is top-left aligned")
        backend = getattr(SDPBackend, backend_name)
        q, k, v = x["bhsd"]
        gqa = case.h != case.h_kv
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def run():
            with sdpa_kernel(backend):
                return sdpa(q, k, v, is_causal=case.causal, enable_gqa=gqa)

        run()  # raises here when the backend refuses the case
        run.layout = "bhsd"
        return run
    return prepare


def _flex(case, x):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = x["bhsd"]
    offset = case.s_k - case.s_q
    left, right = case.window
    if case.causal:
        right = 0

    def keep(b, h, i, j):  # bottom-right aligned, as fastattn
        ok = (j >= 0)
        if right >= 0:
            ok = ok & (j <= i + offset + right)
        if left >= 0:
            ok = ok & (j >= i + offset - left)
        return ok

    block_mask = None
    if case.mask != "full":
        block_mask = create_block_mask(keep, None, None, case.s_q, case.s_k, device=q.device)
    _allow_recompiles(torch)
    compiled = torch.compile(flex_attention, dynamic=False)
    gqa = case.h != case.h_kv

    def run():
        return compiled(q, k, v, block_mask=block_mask, enable_gqa=gqa)
    run.layout = "bhsd"
    return run


def _allow_recompiles(torch, limit=256):
    """Each case recompiles flex_attention (new shapes and mask); past dynamo's default limit (8)
    it would silently run uncompiled, so raise the limit for the benchmark."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), limit))


def _torch_cpu_sdpa(case, x):
    import torch

    if case.window != (-1, -1) or (case.causal and case.s_q != case.s_k):
        raise NotImplementedError("torch SDPA cannot express this mask without attn_mask")
    q, k, v = x["bhsd"]
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run():
        return sdpa(q, k, v, is_causal=case.causal, enable_gqa=case.h != case.h_kv)
    run.layout = "bhsd"
    return run


def _numpy(case, x):
    """Naive float32 numpy attention (materializes the score matrix)."""
    q, k, v = x["bshd"]
    group = case.h // case.h_kv
    keep = _keep_mask(case)

    def run():
        kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
        s = np.einsum("bihd,bjhd->bhij", q, kk) * (case.d ** -0.5)
        s = np.where(keep, s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return np.einsum("bhij,bjhd->bihd", p, vv)
    return run


def output_bshd(fn, out):
    """fn's output as a float64 numpy (b, s, h, d) array, for comparing peers."""
    if getattr(fn, "layout", "bshd") == "bhsd":
        out = out.transpose(1, 2) if hasattr(out, "detach") else np.swapaxes(out, 1, 2)
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    return np.asarray(out, dtype=np.float64)


def _keep_mask(case):
    left, right = case.window
    if case.causal:
        right = 0
    i = np.arange(case.s_q)[:, None] + case.s_k - case.s_q
    j = np.arange(case.s_k)[None, :]
    keep = np.ones((case.s_q, case.s_k), dtype=bool)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


GPU_PEERS = {
    "fastattn": _fastattn,
    "sdpa-cudnn": _sdpa_with("CUDNN_ATTENTION"),
    "sdpa-flash": _sdpa_with("FLASH_ATTENTION"),
    "sdpa-efficient": _sdpa_with("EFFICIENT_ATTENTION"),
    "flex": _flex,
}
GPU_BASELINE = "sdpa-cudnn"
CPU_TORCH_PEERS = {"fastattn": _fastattn, "torch-sdpa": _torch_cpu_sdpa}
CPU_NUMPY_PEERS = {"fastattn": _fastattn, "numpy": _numpy}


def make_inputs(case, device, torch=None, seed=0):
    """q, k, v in both layouts: 'bshd' (fastattn) and 'bhsd' views of the same memory (SDPA)."""
    rng = np.random.default_rng(seed)
    shapes = [(case.b, case.s_q, case.h, case.d), (case.b, case.s_k, case.h_kv, case.d),
              (case.b, case.s_k, case.h_kv, case.d)]
    if torch is None:
        bshd = [rng.standard_normal(s).astype(case.dtype) for s in shapes]
        return {"bshd": bshd, "bhsd": [np.swapaxes(t, 1, 2) for t in bshd]}
    dtype = getattr(torch, case.dtype)
    bshd = [torch.randn(s, dtype=dtype, device=device) for s in shapes]
    return {"bshd": bshd, "bhsd": [t.transpose(1, 2) for t in bshd]}
