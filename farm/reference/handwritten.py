"""A catalog harness's hand-written reference: upcast inputs, run its NumPy/SciPy function.

Floating inputs go to float64 (complex to complex128) so the reference is more
precise than anything under test; integers and bools stay as they are so wrap-around
semantics match.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.reference.evaluator import flushed


def upcast(x: Any) -> Any:
    if isinstance(x, np.ndarray) or np.isscalar(x):
        a = np.asarray(x)
        if a.dtype.kind == "c":
            return a.astype(np.complex128)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            return a.astype(np.float64)
        return a
    return x


def reference_outputs(h: Harness, args: list[Any], flush: bool = False) -> list[np.ndarray] | None:
    """The reference's outputs as a flat list of arrays, or None if there is none; ``flush``:
    on the arguments with their subnormals flushed (``farm.reference.evaluator.flushed``)."""
    if h.reference is None:
        return None
    with np.errstate(all="ignore"):
        out = h.reference(*[upcast(flushed(a, a.dtype) if flush and isinstance(a, np.ndarray) else a) for a in args])
    if isinstance(out, (tuple, list)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]
