"""How close a device result must be to the float64 reference (pure functions).

The reference is first rounded to the dtype the jaxpr promised (so a float64 value
past float32's range becomes ±Inf, as on the device), then compared with
``|got - ref| <= atol + rtol * |ref|``, where both tolerances are a number of machine
epsilons of that dtype: few for elementwise math, more where the device accumulates
(sums, products, dot, convolution) and rounding order differs, many for linear solves
(whose error is cond(A) * eps). Integers and bools
must be equal; NaN matches NaN and an infinity matches the same infinity.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes  # noqa: F401
import numpy as np

#: Primitives whose device results accumulate rounding in an order the reference does not follow.
ACCUMULATING = frozenset({
    "dot_general", "conv_general_dilated", "reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp",
    "reduce_window_sum", "reduce_window", "reduce", "scatter-add", "scatter-sub", "scatter-mul",
    "select_and_scatter_add", "custom_linear_solve", "triangular_solve", "cholesky", "lu", "qr", "svd", "fft",
    "pow", "integer_pow",
    "igamma", "igammac", "regularized_incomplete_beta", "lgamma", "digamma", "erf_inv",
})

#: Primitives that solve linear systems: the device's error grows with the condition number
#: of the matrix (cond(A) * eps), which a fixed tolerance can only bound (here: cond <= ~4096).
SOLVES = frozenset({"triangular_solve", "custom_linear_solve", "lu", "tridiagonal_solve"})

#: epsilons allowed per kind of computation
ULPS = {"elementwise": 8, "accumulating": 64, "solve": 4096}


def eps(dtype: Any) -> float:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    if dt.kind in "biu":
        return 0.0
    return float(ml_dtypes.finfo(dt).eps)


def kind_of(primitives: set[str]) -> str:
    """The loosest kind of computation among ``primitives``."""
    if primitives & SOLVES:
        return "solve"
    return "accumulating" if primitives & ACCUMULATING else "elementwise"


def tolerance(dtype: Any, kind: str = "elementwise") -> tuple[float, float]:
    """(rtol, atol) for results of ``dtype``; atol is scaled later by the reference's magnitude."""
    e = ULPS[kind] * eps(dtype)
    return e, e


def mismatches(ref: np.ndarray, got: np.ndarray, dtype: Any, kind: str = "elementwise") -> int:
    """How many elements of ``got`` (of ``dtype``) disagree with the reference ``ref``."""
    dt = np.dtype(dtype)
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return max(got.size, ref.size, 1)
    if dt.kind in "biu":
        return int(np.sum(got.astype(dt) != ref.astype(dt)))
    with np.errstate(all="ignore"):
        r = ref.astype(dt).astype(np.complex128 if dt.kind == "c" else np.float64)
        g = got.astype(np.complex128 if dt.kind == "c" else np.float64)
        rtol, atol = tolerance(dt, kind)
        finite = np.isfinite(r)
        scale = float(np.max(np.abs(r[finite]), initial=1.0)) if kind != "elementwise" else 1.0
        tiny = float(ml_dtypes.finfo(dt if dt.kind != "c" else (np.float32 if dt.itemsize == 8 else np.float64)).tiny)
        close = np.abs(g - r) <= np.maximum(atol * scale, tiny) + rtol * np.abs(r)
        same = (g == r) | (np.isnan(g) & np.isnan(r)) if dt.kind != "c" else \
            (g == r) | (np.isnan(g) & np.isnan(r))
    return int(np.sum(~(close | same)))
