"""A catalog harness's hand-written reference: upcast inputs, run its NumPy/SciPy function.

Floating inputs go to float64 (complex to complex128) so the reference is more
precise than anything under test; integers and bools stay as they are so wrap-around
semantics match.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.catalog import Harness


def upcast(x: Any) -> Any:
    if isinstance(x, np.ndarray) or np.isscalar(x):
        a = np.asarray(x)
        if a.dtype.kind == "c":
            return a.astype(np.complex128)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            return a.astype(np.float64)
        return a
    return x


def flushed(x: Any) -> Any:
    """``x`` with its subnormal floating values made zeros of the same sign, as a device that
    flushes subnormal inputs (XLA:CPU does, for every float dtype) reads it."""
    if not isinstance(x, np.ndarray) or not (x.dtype.kind in "fc" or x.dtype.name == "bfloat16"):
        return x
    import ml_dtypes  # noqa: PLC0415  (already loaded by jax)

    real = np.float32 if x.dtype == np.complex64 else (np.float64 if x.dtype.kind == "c" else x.dtype)
    tiny = float(ml_dtypes.finfo(real).tiny)

    def f(v: np.ndarray) -> np.ndarray:
        return np.where(np.abs(v) < tiny, np.copysign(0.0, v), v).astype(v.dtype)
    return (f(x.real) + 1j * f(x.imag)).astype(x.dtype) if np.iscomplexobj(x) else f(x)


def reference_outputs(h: Harness, args: list[Any], flush: bool = False) -> list[np.ndarray] | None:
    """The reference's outputs as a flat list of arrays, or None if there is none; ``flush``:
    on the arguments with their subnormals flushed (``flushed``)."""
    if h.reference is None:
        return None
    with np.errstate(all="ignore"):
        out = h.reference(*[upcast(flushed(a) if flush else a) for a in args])
    if isinstance(out, (tuple, list)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]
