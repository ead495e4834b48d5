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


def block_keep(blocks, h_q, s_q, s_k):
    """The element mask (mask_batch, h_q, s_q, s_k) of a block mask (mask, block_q, block_k)."""
    mask, block_q, block_k = blocks
    m = (mask != 0).repeat_interleave(h_q // mask.shape[1], dim=1)
    return m.repeat_interleave(block_q, dim=2).repeat_interleave(block_k, dim=3)[:, :, :s_q, :s_k]


def attention(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, blocks=None, bits=None, add=None):
    """(b, s, h, d) float64 attention; fully masked rows give zeros. blocks: (mask, block_q, block_k)
    of kept blocks ANDed with the window (docs/masks.md); bits: a bool keep-mask of every pair
    (mask_batch, mask_heads, s_q, s_k) ANDed too (the element bitmask's truth). add: an additive score
    term broadcastable to (b, h, s_q, s_k), added after softcap (a bias, ALiBi)."""
    q, k, v = q.double(), k.double(), v.double()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    keep = keep_mask(q.shape[1], k.shape[1], causal, window, q.device)
    if blocks is not None:
        keep = keep & block_keep(blocks, q.shape[2], q.shape[1], k.shape[1]).to(q.device)
    if bits is not None:
        keep = keep & bits.to(q.device).repeat_interleave(q.shape[2] // bits.shape[1], dim=1)
    s = s.masked_fill(~keep, float("-inf"))
    if add is not None:
        s = s + add.to(s.device, torch.float64)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhij,bjhd->bihd", p, v)


def _round(x, dtype):
    """x (float32) rounded to dtype and back: the operand a tensor-core matmul of dtype reads."""
    return x.to(dtype).float()


def lowp_backward(q, k, v, dout, dtype, scale=None, causal=False, window=(-1, -1), softcap=0.0, bits=None,
                  add=None):
    """(dq, dk, dv) float64, computed the way a flash backward does in `dtype`: float32 scores,
    P and dS rounded to dtype before their matmuls (float32 accumulation), results rounded to
    dtype. The "same math in the input precision" of FA3's tolerance rule. bits, add: as attention's."""
    q, k, v, dout = (x.detach().float() for x in (q, k, v, dout))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[2] // k.shape[2]
    ke, ve = (x.repeat_interleave(group, dim=2) for x in (k, v))
    s = torch.einsum("bihd,bjhd->bhij", q, ke) * scale
    t = softcap * torch.tanh(s / softcap) if softcap > 0 else s
    keep = keep_mask(q.shape[1], k.shape[1], causal, window, q.device)
    if bits is not None:
        keep = keep & bits.to(q.device).repeat_interleave(q.shape[2] // bits.shape[1], dim=1)
    t = t.masked_fill(~keep, float("-inf"))
    if add is not None:
        t = t + add.to(t.device, torch.float32)
    p = torch.softmax(t, dim=-1).nan_to_num(0.0)
    out = torch.einsum("bhij,bjhd->bihd", _round(p, dtype), ve)
    rowsum = (_round(out, dtype) * dout).sum(-1).transpose(1, 2)[..., None]  # D = rowsum(dO o O)
    p16 = _round(p, dtype)
    dv = torch.einsum("bhij,bihd->bjhd", p16, dout)
    dp = torch.einsum("bihd,bjhd->bhij", dout, ve)
    ds = p * (dp - rowsum)
    if softcap > 0:
        ds = ds * (1 - torch.tanh(s / softcap) ** 2)
    ds16 = _round(ds, dtype)
    dq = torch.einsum("bhij,bjhd->bihd", ds16, ke) * scale
    dk = torch.einsum("bhij,bihd->bjhd", ds16, q) * scale

    def fold(x):  # sum over the query heads of each kv head
        b, s_, _, d = x.shape
        return x.reshape(b, s_, k.shape[2], group, d).sum(dim=3)
    return tuple(_round(g, dtype).double() for g in (dq, fold(dk), fold(dv)))


def aot_graphs():
    """(backend, graphs): a torch.compile backend recording the forward and backward graphs that
    AOTAutograd hands it (graphs["fw"], graphs["bw"], lists of fx.GraphModule), run eagerly."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = {"fw": [], "bw": []}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind].append(gm)
            return make_boxed_func(gm)
        return compiler
    return aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw")), graphs


def op_calls(gm, name):
    """The call_function nodes of gm calling the custom op `name` (e.g. "fastattn.bwd")."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target)]


def deterministic_flag(node, position):
    """The `deterministic` argument of a traced fastattn op call (FX drops it when default)."""
    return node.args[position] if len(node.args) > position else node.kwargs.get("deterministic", False)
