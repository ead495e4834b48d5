"""Calls with nothing to compute are valid, as in FlashAttention: out 0, lse -inf (numpy, CPU)."""
import numpy as np

import fastattn
from checks import randn


def test_no_keys(rng):
    q = randn(rng, (2, 5, 4, 32))
    k = randn(rng, (2, 0, 2, 32))
    out, lse = fastattn.flash_attn_func(q, k, k, causal=True, return_attn_probs=True)
    assert out.shape == (2, 5, 4, 32) and (out == 0).all()
    assert lse.shape == (2, 4, 5) and np.isneginf(lse).all()


def test_varlen_all_empty_with_zero_bounds(rng):
    q = randn(rng, (0, 4, 32))
    k = randn(rng, (0, 2, 32))
    cu = np.zeros(4, np.int32)
    out, lse = fastattn.flash_attn_varlen_func(q, k, k, cu, cu, 0, 0, return_attn_probs=True)
    assert out.shape == (0, 4, 32) and lse.shape == (4, 0)


def test_varlen_queries_without_keys(rng):
    q = randn(rng, (6, 4, 32))
    k = randn(rng, (0, 2, 32))
    cu_q = np.array([0, 2, 2, 6], np.int32)
    cu_k = np.zeros(4, np.int32)
    out, lse = fastattn.flash_attn_varlen_func(q, k, k, cu_q, cu_k, 4, 0, return_attn_probs=True)
    assert (out == 0).all() and np.isneginf(lse).all()
