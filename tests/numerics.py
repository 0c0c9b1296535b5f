"""One way to compare float32 results that were computed along different paths, for the whole suite.

Two float32 computations of one quantity that add in different orders differ by rounding: another CPU's
vector kernels (torch picks them by the CPU; ATEN_CPU_CAPABILITY=default or avx2 stands in for another CPU),
another number of torch threads (the pages run short work on one thread, tests on every core), chunks of
another size. Each addition rounds by up to half a unit in the last place of the running sum, and over n
terms the errors grow as about sqrt(n): two paths agree to about eps(float32) x the magnitude of the terms
summed x sqrt(n). F32_SLACK more allows for the chain of sums behind one number (a head's share of a logit is
a sum over the model's width of values that are themselves sums over keys and over the head's size).
A wrong number is off by far more: a mis-scaled share, a key off by one, a dropped head (1e-3 and up).

    assert_float32_close(page_shares, shares, terms=576)       # sums over SmolLM2's 576-wide stream
    assert roles.induction[l, h] == float32_approx(mean, terms=51)

Results of float64 arithmetic, or compared along one path, keep their own tight tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: the spacing of float32 numbers just above 1
F32_SLACK = 8  # units of eps x magnitude x sqrt(terms) two float32 paths may differ by


def float32_tolerance(magnitude: float, terms: int) -> float:
    """How far apart two float32 results may be when each sums `terms` values of about `magnitude` (the
    largest |value| the sums run through) in its own order."""
    return F32_SLACK * EPS32 * float(magnitude) * float(np.sqrt(max(1, terms)))


def _magnitude(expected, magnitude) -> float:
    if magnitude is not None:
        return float(magnitude)
    a = np.abs(np.asarray(expected, dtype=np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def assert_float32_close(actual, expected, *, terms: int, magnitude: float | None = None, err_msg: str = ""):
    """np.testing.assert_allclose for float32 results of different paths: the tolerance is
    float32_tolerance(magnitude, terms), `magnitude` by default the largest |expected| (NaNs must match)."""
    atol = float32_tolerance(_magnitude(expected, magnitude), terms)
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                               rtol=0, atol=atol, err_msg=err_msg)


def float32_approx(expected, *, terms: int, magnitude: float | None = None):
    """pytest.approx(expected) within float32_tolerance: for a float32 number (or list) of another path."""
    return pytest.approx(expected, rel=0, abs=float32_tolerance(_magnitude(expected, magnitude), terms))
