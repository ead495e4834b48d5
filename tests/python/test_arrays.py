"""The array adapters' stride fixes (python/fastattn/_arrays.py), without a GPU: the CuPy adapter is
driven with numpy standing in for cupy (it calls only ascontiguousarray), so its rule is checked on
any machine. CUDA arrays with a broadcast (stride 0) or reversed (negative stride) dim of more than
one element are copied dense, since the CUDA kernels load by TMA, which takes positive strides only;
dims of one element keep any stride, and everything else is passed through as it is."""
import numpy as np

from fastattn._arrays import CupyArrays, tma_unreadable


def test_tma_unreadable_rule():
    assert not tma_unreadable((2, 3, 4, 8), (96, 32, 8, 1))
    assert not tma_unreadable((1, 3, 1, 8), (0, 8, -5, 1))  # one-element dims: any stride
    assert not tma_unreadable((0, 3), (0, 1)) and not tma_unreadable((), ())
    assert tma_unreadable((2, 3), (0, 1))
    assert tma_unreadable((3, 2, 8), (16, -8, 1))


def test_cupy_adapter_copies_broadcast_and_reversed(rng):
    xs = CupyArrays(np)
    base = rng.standard_normal((2, 3, 4, 8)).astype(np.float16)
    views = {
        "heads broadcast": np.broadcast_to(base[:, :, :1], base.shape),
        "batch broadcast": np.broadcast_to(base[:1], base.shape),
        "tokens reversed": base[:, ::-1],
        "heads reversed": base[:, :, ::-1],
    }
    for name, x in views.items():
        y = xs.unit_last(x)
        assert y is not x, name
        assert all(st > 0 for st in y.strides), (name, y.strides)
        assert np.array_equal(y, x), name
    for name, x in {"dense": base, "strided": base[:, ::2], "one head, stride 0":
                    np.lib.stride_tricks.as_strided(base, (2, 3, 1, 8), (192, 64, 0, 2))}.items():
        assert xs.unit_last(x) is x, name
    # a reversed last dim keeps the old rule: copied for its non-unit stride
    assert xs.unit_last(base[..., ::-1]).strides[-1] == 2
