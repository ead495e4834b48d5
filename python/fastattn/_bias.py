"""The additive score bias (docs/masks.md, Additive bias) as the front ends take it: 2-D (s_q, s_k),
3-D (heads, s_q, s_k) or 4-D (batch, heads, s_q, s_k), unsqueezed on the left as SDPA broadcasts its
attn_mask; a query or key dim of size 1 is broadcast to the sequence (a (b, 1, 1, s_k) padding bias).
Works on numpy arrays and torch tensors alike (indexing, broadcast_to / expand): on torch these are
differentiable ops, so autograd sums the gradient of a broadcast bias back to the caller's shape."""


def bias_4d(bias, seqlen_q, seqlen_k):
    """`bias` as 4-D (bias_batch, bias_heads, rows, cols); None stays None. Dims 0 and 1 of size 1 stay
    (fastattn broadcasts them); rows / cols of size 1 are broadcast to seqlen_q / seqlen_k (torch: an
    expand, copied dense when the key dim grows (it must have unit stride); numpy: a dense copy)."""
    if bias is None:
        return None
    nd, given = len(bias.shape), tuple(bias.shape)
    if nd < 2 or nd > 4:
        raise ValueError(f"bias: expected 2 to 4 dims ((s_q, s_k), (heads, s_q, s_k) or (batch, heads, s_q, s_k)), "
                         f"got shape {tuple(bias.shape)}")
    if nd < 4:
        bias = bias[(None,) * (4 - nd)]
    rows, cols = bias.shape[2], bias.shape[3]
    # An empty bias has no data address, which the C++ layer would read as no bias at all (its rule: every dim
    # >= 1, checked only on a bias it sees).
    if 0 in tuple(bias.shape):
        raise ValueError(f"bias: shape {given} has no elements; every dim of (bias_batch, bias_heads, rows, cols) "
                         "needs 1..2^31-1")
    grow_rows, grow_cols = rows == 1 and seqlen_q > 1, cols == 1 and seqlen_k > 1
    if not (grow_rows or grow_cols):
        return bias
    shape = (bias.shape[0], bias.shape[1], seqlen_q if grow_rows else rows, seqlen_k if grow_cols else cols)
    if hasattr(bias, "expand"):  # torch
        bias = bias.expand(shape)
        return bias.contiguous() if grow_cols else bias
    import numpy as np

    return np.ascontiguousarray(np.broadcast_to(bias, shape))  # dense: DLPack exports no read-only broadcast
