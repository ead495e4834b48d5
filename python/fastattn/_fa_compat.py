"""FlashAttention 2/3 keyword arguments that fastattn's flash_attn_func / flash_attn_varlen_func take
only so FA code runs unchanged: hints checked and then unused (the answer does not depend on them),
and features fastattn lacks, refused by name rather than ignored (docs/python.md, compatibility table)."""
from __future__ import annotations

import numbers

import numpy as np

from ._ints import INT32_MAX, int_arg



def check(*, dropout_p=0.0, num_splits=1, pack_gqa=None, sm_margin=0, q_descale=None, k_descale=None,
          v_descale=None, qv=None):
    """Raise for what fastattn cannot honour; accept the scheduling hints (num_splits, pack_gqa,
    sm_margin), which change no result: the forward without a KV cache runs unsplit (FA3 splits only
    when asked or, at num_splits 0, when its heuristic says so; both give the same out up to rounding)."""
    if (type(dropout_p) is float and dropout_p == 0.0 and type(num_splits) is int and type(sm_margin) is int
            and 0 <= num_splits <= INT32_MAX and 0 <= sm_margin <= INT32_MAX and pack_gqa is None
            and q_descale is None and k_descale is None and v_descale is None and qv is None):
        return  # the usual call (FA's defaults): this runs on every call, the checks below cost ~1 us
    if isinstance(dropout_p, (bool, np.bool_)) or not isinstance(dropout_p, numbers.Real):  # numpy scalars too
        raise TypeError(f"dropout_p: expected a float, got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p: must lie in [0, 1] but got {dropout_p}")
    if dropout_p != 0.0:
        raise NotImplementedError("dropout_p: fastattn has no attention dropout; pass dropout_p=0.0")
    for name, x in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        if x is not None:
            raise NotImplementedError(f"{name}: fastattn has no fp8 attention (FA3's fp8 descale factors)")
    if qv is not None:
        raise NotImplementedError("qv: FA3's extra query-value product (MLA) is not supported")
    int_arg(num_splits, "num_splits", 0)  # the extension's int32 (FA's binding: a C int)
    int_arg(sm_margin, "sm_margin", 0)
    if pack_gqa is not None and not isinstance(pack_gqa, bool):
        raise TypeError(f"pack_gqa: expected None or a bool, got {type(pack_gqa).__name__}")


_FA2_ORDER = ("FA2 passes (q, k, v, dropout_p, softmax_scale, causal) in that order, fastattn FA3's (q, k, v, "
              "softmax_scale, causal): pass FA2's arguments by keyword")


def check_order(softmax_scale, causal):
    """Refuse the values an FA2 call makes when it passes dropout_p (and softmax_scale) by position: fastattn's
    softmax_scale then holds dropout_p (0.0 at inference, which would weight every key alike) and causal FA2's
    softmax_scale (None or a float). Neither is a value an FA3 call means: FA3's causal is a bool."""
    if softmax_scale is not None and not isinstance(softmax_scale, bool) and float(softmax_scale) == 0.0:
        raise ValueError(f"softmax_scale: 0 weights every key alike (ignores q); {_FA2_ORDER}")
    if not isinstance(causal, (bool, np.bool_)) and not (type(causal) is int and causal in (0, 1)):
        raise TypeError(f"causal: expected a bool, got {causal!r} ({type(causal).__name__}); {_FA2_ORDER}")
