"""Float64 torch reference (autograd gives the reference gradients); bottom-right masks."""
import torch


def keep_mask(s_q, s_k, causal=False, window=(-1, -1), device="cpu"):
    left, right = window
    if causal:
        right = 0
    i = torch.arange(s_q, device=device)[:, None]
    j = torch.arange(s_k, device=device)[None, :]
    diag = i + s_k - s_q
    keep = torch.ones(s_q, s_k, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= j <= diag + right
    if left >= 0:
        keep &= j >= diag - left
    return keep


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0):
    """(b, s, h, d) float64 attention; fully masked rows give zeros."""
    q, k, v = q.double(), k.double(), v.double()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    keep = keep_mask(q.shape[1], k.shape[1], causal, window, q.device)
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhij,bjhd->bihd", p, v)
