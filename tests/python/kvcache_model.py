"""A numpy model of flash_attn_with_kvcache, written from FlashAttention's docstring: append (with
rotary) into a copy of the cache, then per sequence the float64 attention over its keys."""
import numpy as np

import attn_reference as ref


def rotary_angles(s_ro, rot):
    """cos, sin tables (s_ro, rot / 2) of the usual 10000^(-2j/rot) frequencies."""
    pos = np.arange(s_ro)[:, None]
    freq = 10000.0 ** (-2.0 * np.arange(rot // 2) / rot)
    return np.cos(pos * freq), np.sin(pos * freq)


def rotate(x, cos, sin, interleaved):
    """x (..., d) at the angles cos/sin (..., rot / 2), in float64; dims past rot unchanged."""
    x = np.array(x, dtype=np.float64)
    rot = 2 * cos.shape[-1]
    if interleaved:
        x0, x1 = x[..., 0:rot:2].copy(), x[..., 1:rot:2].copy()
        x[..., 0:rot:2] = x0 * cos - x1 * sin
        x[..., 1:rot:2] = x0 * sin + x1 * cos
    else:
        half = rot // 2
        x0, x1 = x[..., :half].copy(), x[..., half:rot].copy()
        x[..., :half] = x0 * cos - x1 * sin
        x[..., half:rot] = x0 * sin + x1 * cos
    return x


def slot(b, pos, page_table, page_size, batch_idx):
    if page_table is not None:
        return page_table[b, pos // page_size], pos % page_size
    return (b if batch_idx is None else batch_idx[b]), pos


def model(q, k_cache, v_cache, k=None, v=None, cos=None, sin=None, seqlens=None, batch_idx=None,
          leftpad=None, page_table=None, causal=False, window=(-1, -1), softcap=0.0,
          interleaved=True, dtype=np.float32):
    """(k_cache after, v_cache after, out64, lse64, out in the same-precision estimate)."""
    kc, vc = k_cache.astype(np.float64), v_cache.astype(np.float64)
    b, s_q = q.shape[:2]
    page = k_cache.shape[1] if page_table is not None else 0
    capacity = page * page_table.shape[1] if page_table is not None else k_cache.shape[1]
    if seqlens is None:
        seqlens = capacity
    n = [int(seqlens)] * b if np.isscalar(seqlens) else [int(x) for x in seqlens]
    s_new = 0 if k is None else k.shape[1]
    lp = [0] * b if leftpad is None else [int(x) for x in leftpad]
    advance = causal or window[0] >= 0 or window[1] >= 0
    qr = q.astype(np.float64)
    for i in range(b):
        for t in range(s_new):
            row, at = slot(i, n[i] + t, page_table, page, batch_idx)
            kt = k[i, t].astype(np.float64)
            if cos is not None:
                kt = ref.round_to(rotate(kt, cos[n[i] + t], sin[n[i] + t], interleaved), dtype)
            kc[row, at] = kt
            vc[row, at] = v[i, t]
        if cos is not None:
            for t in range(s_q):
                p = n[i] + (t if advance else 0)
                qr[i, t] = ref.round_to(rotate(q[i, t], cos[p], sin[p], interleaved), dtype)
    d_v = v_cache.shape[-1]
    out64 = np.zeros((b, s_q, q.shape[2], d_v))
    outlp = np.zeros_like(out64)
    lse64 = np.zeros((b, q.shape[2], s_q))
    for i in range(b):
        slots = [slot(i, p, page_table, page, batch_idx) for p in range(lp[i], n[i] + s_new)]
        ks = np.array([kc[r, a] for r, a in slots]).reshape(len(slots), *kc.shape[2:])
        vs = np.array([vc[r, a] for r, a in slots]).reshape(len(slots), *vc.shape[2:])
        kw = dict(causal=causal, window=window, softcap=softcap)
        o, l = ref.forward(qr[i:i + 1], ks[None], vs[None], **kw)
        olp, _ = ref.forward(qr[i:i + 1], ks[None], vs[None], dtype=dtype, **kw)
        out64[i], lse64[i], outlp[i] = o[0], l[0], olp[0]
    return kc, vc, out64, lse64, outlp


def alibi_kvcache_reference(q, k_cache, v_cache, k, v, seqlens, leftpad, slopes, causal, dtype=np.float64):
    """flash_attn_with_kvcache with ALiBi by FlashAttention's rule, written out on its own (not through model()
    above): append k / v at cache_seqlens, then per sequence softmax(scale q k^T - slope |i + s_k - s_q - j|) v
    over the keys [leftpad, seqlens + s_new), s_k their count and j counted from leftpad, causal bottom-right
    (j <= i + s_k - s_q). dtype float64: the reference; any other (a numpy float dtype or "bfloat16"): the
    same-precision estimate of FA3's rule, float32 arithmetic with the probabilities and out rounded to `dtype`
    (as attn_reference.forward's). Returns (k_cache, v_cache, out, lse); a row that keeps no key has out 0 and
    lse -inf."""
    exact = isinstance(dtype, type) and dtype == np.float64
    work = np.float64 if exact else np.float32
    b, s_q, h, d = q.shape
    group = h // k_cache.shape[2]
    kc, vc = k_cache.astype(work), v_cache.astype(work)
    s_new = 0 if k is None else k.shape[1]
    lp = np.zeros(b, np.int64) if leftpad is None else np.asarray(leftpad, np.int64)
    for i in range(b if s_new else 0):
        kc[i, seqlens[i]:seqlens[i] + s_new] = k[i]
        vc[i, seqlens[i]:seqlens[i] + s_new] = v[i]
    sl = np.broadcast_to(np.asarray(slopes, work), (b, h))
    out = np.zeros((b, s_q, h, v_cache.shape[-1]), work)
    lse = np.full((b, h, s_q), -np.inf)
    for i in range(b):
        lo, hi = lp[i], seqlens[i] + s_new
        s_k = hi - lo
        if s_k == 0:
            continue
        keys = np.repeat(kc[i, lo:hi], group, axis=1)  # (s_k, h, d): query head hq reads kv head hq // group
        vals = np.repeat(vc[i, lo:hi], group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q[i].astype(work), keys) * work(d ** -0.5)
        row, col = np.arange(s_q)[:, None], np.arange(s_k)[None, :]
        scores = scores - sl[i][:, None, None] * np.abs(row + s_k - s_q - col).astype(work)
        if causal:
            scores = np.where(col <= row + s_k - s_q, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0)
        p = np.exp(scores - top)
        total = p.sum(axis=-1, keepdims=True)
        p = p / np.where(total > 0, total, 1)
        if not exact:
            p = ref.round_to(p, dtype)
        o = np.einsum("hqk,khd->qhd", p, vals)
        out[i] = o if exact else ref.round_to(o, dtype)
        with np.errstate(divide="ignore"):
            lse[i] = np.where(total[..., 0] > 0, np.log(total[..., 0]) + top[..., 0], -np.inf)
    return kc, vc, out, lse
