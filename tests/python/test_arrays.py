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


def test_cpu_backend_reads_broadcast_and_reversed_views(rng):
    """On the CPU strides are free (only the CUDA adapters copy): numpy views with a broadcast dim
    (k over its heads, dout over its batch) and reversed dims (v's tokens, q's heads) give the bits
    of their dense copies, forward and backward."""
    import fastattn

    b, sq, sk, h, d = 2, 17, 33, 4, 32
    q = rng.standard_normal((b, sq, h, d)).astype(np.float32)[:, :, ::-1]
    k = np.broadcast_to(rng.standard_normal((b, sk, 1, d)).astype(np.float32), (b, sk, h, d))
    v = rng.standard_normal((b, sk, h, d)).astype(np.float32)[:, ::-1]
    dout = np.broadcast_to(rng.standard_normal((1, sq, h, d)).astype(np.float32), (b, sq, h, d))
    dense = [np.ascontiguousarray(x) for x in (q, k, v, dout)]
    for causal in (False, True):
        out, lse = fastattn.forward(q, k, v, causal=causal)
        out_d, lse_d = fastattn.forward(*dense[:3], causal=causal)
        assert np.array_equal(out, out_d) and np.array_equal(lse, lse_d)
        grads = fastattn.backward(dout, q, k, v, out, lse, causal=causal)
        grads_d = fastattn.backward(dense[3], *dense[:3], out_d, lse_d, causal=causal)
        for name, g, gd in zip(("dq", "dk", "dv"), grads, grads_d):
            assert np.array_equal(g, gd), name
