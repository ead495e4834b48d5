"""Comparison helpers: the FA3 tolerance rule applied to every element."""
import numpy as np


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def rounding_step(dtype, ref64):
    """One rounding step of `dtype` at the largest magnitude of the reference."""
    eps = {"bfloat16": 2.0 ** -7}.get(dtype) if isinstance(dtype, str) else np.finfo(dtype).eps
    return eps * max(1.0, float(np.nanmax(np.abs(ref64))) if ref64.size else 1.0)


def assert_close(name, got, ref64, ref_lowp, dtype, floor=0.0):
    """FA3's rule, every element: max|got - ref| <= 2 max|lowp - ref| + one rounding step.

    NaN in ref64 marks elements that are not compared (e.g. varlen rows outside every sequence).
    `floor` (relative to max|ref|) lifts the bound for float32, where the numpy estimate sums
    pairwise and so is more accurate than any kernel's sequential float32 accumulation.
    """
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref64.shape, f"{name}: shape {got.shape} != {ref64.shape}"
    valid = ~np.isnan(ref64)
    if not valid.any():
        return
    assert np.isfinite(got[valid]).all(), f"{name}: non-finite values where the reference is finite"
    lowp_err = float(np.max(np.abs(ref_lowp[valid] - ref64[valid])))
    magnitude = max(1.0, float(np.max(np.abs(ref64[valid]))))
    bound = 2 * lowp_err + rounding_step(dtype, ref64[valid]) + floor * magnitude
    err = np.where(valid, np.abs(got - ref64), 0)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert err[worst] <= bound, (f"{name}: max error {err[worst]:.3g} at {worst} "
                                 f"(got {got[worst]:.6g}, ref {ref64[worst]:.6g}) > bound {bound:.3g}")


def assert_lse_close(got, ref64, rtol=1e-5):
    """LSE: -inf exactly where the reference row keeps nothing, else close (float32 output)."""
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref64.shape, f"lse: shape {got.shape} != {ref64.shape}"
    valid = ~np.isnan(ref64)
    empty = valid & np.isneginf(ref64)
    assert np.isneginf(got[empty]).all(), "lse: rows that keep no key must be -inf"
    full = valid & np.isfinite(ref64)
    err = np.abs(got[full] - ref64[full])
    bound = rtol * np.maximum(1.0, np.abs(ref64[full]))
    assert (err <= bound).all(), f"lse: max error {err.max():.3g}"


FLOAT32_FLOOR = 1e-5  # ~80 float32 rounding steps; a wrong mask or scale errs by >1e-2

