"""Integer arguments as the extension takes them (C int32): checked here, before the binding, whose own
answer to a bool, a float or a value past int32 is nanobind's "incompatible function arguments" listing
(or, for a float that int() would take, a silent truncation)."""
from __future__ import annotations

import operator

import numpy as np

INT32_MAX = 2**31 - 1
INT32_MIN = -2**31


def int_arg(value, name, lo=INT32_MIN, hi=INT32_MAX, note=""):
    """value as a Python int. Takes Python ints and integer scalars (numpy, a 0-d torch / numpy integer
    array: anything with __index__); TypeError for bools and non-integers (floats: FlashAttention's binding
    refuses them too), ValueError outside [lo, hi] (lo, hi within int32). note: said after the range."""
    if type(value) is int and lo <= value <= hi:  # the usual case first: this runs on every call (~0.1 us)
        return value
    if isinstance(value, (bool, np.bool_)) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool"):
        raise TypeError(f"{name}: expected an int, got bool")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
    if not lo <= n <= hi:
        raise ValueError(f"{name}: must be in [{lo}, {hi}]{note} but got {n}")
    return n
