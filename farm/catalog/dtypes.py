"""The farm's dtype names, the groups harnesses are defined over, default tolerances."""
from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES: tuple[str, ...] = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "bfloat16", "float16", "float32", "float64", "complex64", "complex128",
)
X64_DTYPES = frozenset({"int64", "uint64", "float64", "complex128"})
INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
FLOAT = ("bfloat16", "float16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
INEXACT = FLOAT + COMPLEX
NUMERIC = INTEGER + INEXACT
ALL = ("bool",) + NUMERIC

#: Default tolerances (rtol, atol) by result dtype; integers and bool are exact.
DEFAULT_TOL: dict[str, tuple[float, float]] = {
    "bfloat16": (2e-2, 1e-2),
    "float16": (4e-3, 1e-3),
    "float32": (2e-5, 1e-6),
    "float64": (1e-12, 1e-14),
    "complex64": (2e-5, 1e-6),
    "complex128": (1e-12, 1e-14),
}


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype for a farm dtype name (bfloat16 through ml_dtypes)."""
    if name == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
