"""Float64 numpy reference of attention forward/backward, written independently of fastattn.

Layout (batch, seqlen, heads, dim). Masks are bottom-right aligned: row i keeps key j when
i + s_k - s_q - left <= j <= i + s_k - s_q + right (a side < 0 is unbounded; causal: right = 0).
Rows that keep nothing give out = 0, lse = -inf, and zero gradients. `blocks` = (mask, block_q,
block_k) adds a block-sparse mask: pair (i, j) of batch b, head h is kept only where
mask[b or 0, h // (h_q // mask_heads), i // block_q, j // block_k] is nonzero.
"""
import numpy as np


def round_to(x, dtype):
    """x (float32) rounded to `dtype`: a numpy float dtype or "bfloat16" (round to nearest even)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "bfloat16":
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return u.astype(np.uint32).view(np.float32)
    return x.astype(dtype).astype(np.float32)


def keep_mask(s_q, s_k, causal=False, window=(-1, -1)):
    """Boolean (s_q, s_k) mask of kept (query, key) pairs."""
    left, right = window
    if causal:
        right = 0
    i = np.arange(s_q)[:, None]
    j = np.arange(s_k)[None, :]
    diag = i + s_k - s_q
    keep = np.ones((s_q, s_k), dtype=bool)
    if right >= 0:
        keep &= j <= diag + right
    if left >= 0:
        keep &= j >= diag - left
    return keep


def block_keep(blocks, h_q, s_q, s_k):
    """The element mask (mask_batch, h_q, s_q, s_k) of a block mask (mask, block_q, block_k)."""
    mask, block_q, block_k = blocks
    m = np.asarray(mask) != 0
    m = np.repeat(m, h_q // m.shape[1], axis=1)
    return np.repeat(np.repeat(m, block_q, axis=2), block_k, axis=3)[:, :, :s_q, :s_k]


def _keep(q, k, causal, window, blocks):
    """Kept pairs, broadcastable to the scores (b, h, s_q, s_k)."""
    keep = keep_mask(q.shape[1], k.shape[1], causal, window)
    return keep if blocks is None else keep & block_keep(blocks, q.shape[2], q.shape[1], k.shape[1])


def _expand_kv(x, h_q):
    """(b, s, h_kv, d) -> (b, s, h_q, d) by repeating each kv head over its query group."""
    return np.repeat(x, h_q // x.shape[2], axis=2)


def _scores(q, k, scale, softcap):
    """Raw scaled scores s (b, h, s_q, s_k) and the scores after softcapping."""
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        return s, softcap * np.tanh(s / softcap)
    return s, s


def forward(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, dtype=np.float64, blocks=None,
            add=None):
    """(out (b, s_q, h, d_v), lse (b, h, s_q)).

    dtype=float64 is the truth. A lower dtype gives the same-precision estimate used by the
    tolerance rule: float32 arithmetic, probabilities and output rounded to `dtype`.
    add: None or an additive score term broadcastable to (b, h, s_q, s_k), added after softcap
    (-inf entries drop their pair; a row that keeps nothing gives 0).
    """
    exact = isinstance(dtype, type) and dtype == np.float64
    work = np.float64 if exact else np.float32
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    h_q = q.shape[2]
    k, v = _expand_kv(k, h_q), _expand_kv(v, h_q)
    _, t = _scores(q, k, scale, softcap)
    keep = _keep(q, k, causal, window, blocks)
    t = np.where(keep, t, -np.inf).astype(work)
    if add is not None:
        t = t + np.asarray(add, dtype=np.float64).astype(work)
    m = t.max(axis=-1, keepdims=True, initial=-np.inf)
    m_safe = np.where(np.isfinite(m), m, 0)
    p = np.exp(t - m_safe)
    l = p.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(l > 0, p / np.where(l > 0, l, 1), 0)
        lse = np.where(l[..., 0] > 0, m_safe[..., 0] + np.log(l[..., 0]), -np.inf)
    if not exact:
        p = round_to(p, dtype)
    out = np.einsum("bhij,bjhd->bihd", p, v.astype(work))
    if not exact:
        out = round_to(out, dtype)
    return out.astype(np.float64), lse.astype(np.float64)


def backward(q, k, v, dout, scale=None, causal=False, window=(-1, -1), softcap=0.0,
             dtype=np.float64, blocks=None, add=None):
    """(dq, dk, dv) of forward's out for upstream gradient dout: float64 truth, or for a lower
    dtype the same-precision estimate (float32 arithmetic, results rounded to dtype, D = rowsum(dout * out)
    over out rounded to dtype as the kernels read the stored out).
    add: an additive score term as forward's (a constant: it changes P, not the chain rule)."""
    exact = isinstance(dtype, type) and dtype == np.float64
    work = np.float64 if exact else np.float32
    q, k, v, dout = (np.asarray(x, dtype=work) for x in (q, k, v, dout))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    h_q, h_kv = q.shape[2], k.shape[2]
    ke, ve = _expand_kv(k, h_q), _expand_kv(v, h_q)
    s, t = _scores(q, ke, scale, softcap)
    keep = _keep(q, k, causal, window, blocks)
    t = np.where(keep, t, -np.inf)
    if add is not None:
        t = t + np.asarray(add, dtype=np.float64).astype(work)
    m = t.max(axis=-1, keepdims=True, initial=-np.inf)
    p = np.exp(t - np.where(np.isfinite(m), m, 0))
    l = p.sum(axis=-1, keepdims=True)
    p = np.where(l > 0, p / np.where(l > 0, l, 1), 0)
    dv = np.einsum("bhij,bihd->bjhd", p, dout)
    dp = np.einsum("bihd,bjhd->bhij", dout, ve)
    if exact:
        row_dot = (p * dp).sum(axis=-1, keepdims=True)
    else:  # as every FlashAttention backward: D = rowsum(dout * out) over the out stored in dtype
        out = round_to(np.einsum("bhij,bjhd->bihd", p, ve), dtype).astype(work)
        row_dot = np.einsum("bihd,bihd->bhi", dout, out)[..., None]
    ds = p * (dp - row_dot)
    if softcap > 0:
        ds = ds * (1 - np.tanh(s / softcap) ** 2)
    ds = ds * scale
    dq = np.einsum("bhij,bjhd->bihd", ds, ke)
    dk = np.einsum("bhij,bihd->bjhd", ds, q)

    def fold(x):  # sum the query-head group of each kv head
        b, s_, _, d = x.shape
        return x.reshape(b, s_, h_kv, h_q // h_kv, d).sum(axis=3)

    grads = (dq, fold(dk), fold(dv))
    if not exact:
        grads = tuple(round_to(g, dtype) for g in grads)
    return tuple(np.asarray(g, dtype=np.float64) for g in grads)


def _sequence_blocks(kw, b):
    """kw with its block mask (if any) cut to sequence b's entry (or the shared one)."""
    if kw.get("blocks") is None:
        return kw
    mask, block_q, block_k = kw["blocks"]
    row = b if np.asarray(mask).shape[0] > 1 else 0
    return dict(kw, blocks=(np.asarray(mask)[row:row + 1], block_q, block_k))


def _sequences(cu_q, cu_k, used_q=None, used_k=None):
    """Per sequence: (q start, q length, k start, k length) after the seqused caps."""
    for b in range(len(cu_q) - 1):
        len_q = int(cu_q[b + 1] - cu_q[b]) if used_q is None else int(used_q[b])
        len_k = int(cu_k[b + 1] - cu_k[b]) if used_k is None else int(used_k[b])
        yield int(cu_q[b]), len_q, int(cu_k[b]), len_k


def varlen_forward(q, k, v, cu_q, cu_k, used_q=None, used_k=None, **kw):
    """Packed (total, h, d) forward: out (total_q, h, d_v) and lse (h, total_q); tokens outside
    every used range are not compared (returned as NaN)."""
    out = np.full(q.shape[:-1] + (v.shape[-1],), np.nan)
    lse = np.full((q.shape[1], q.shape[0]), np.nan)
    for b, (q0, n_q, k0, n_k) in enumerate(_sequences(cu_q, cu_k, used_q, used_k)):
        if n_q == 0:
            continue
        o, l = forward(q[None, q0:q0 + n_q], k[None, k0:k0 + n_k], v[None, k0:k0 + n_k], **_sequence_blocks(kw, b))
        out[q0:q0 + n_q] = o[0]
        lse[:, q0:q0 + n_q] = l[0]
    return out, lse


def varlen_backward(q, k, v, dout, cu_q, cu_k, used_q=None, used_k=None, **kw):
    """Packed (dq, dk, dv); rows outside the used ranges get zero gradient."""
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b, (q0, n_q, k0, n_k) in enumerate(_sequences(cu_q, cu_k, used_q, used_k)):
        if n_q == 0 or n_k == 0:
            continue
        g = backward(q[None, q0:q0 + n_q], k[None, k0:k0 + n_k], v[None, k0:k0 + n_k],
                     dout[None, q0:q0 + n_q], **_sequence_blocks(kw, b))
        dq[q0:q0 + n_q], dk[k0:k0 + n_k], dv[k0:k0 + n_k] = (x[0] for x in g)
    return dq, dk, dv
