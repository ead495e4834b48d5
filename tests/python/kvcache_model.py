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
