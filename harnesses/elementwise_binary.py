"""Elementwise binary lax primitives (arithmetic, min/max, atan2, nextafter, complex)."""
import numpy as np
from jax import lax

from farm.catalog import FLOAT, INEXACT, INTEGER, NUMERIC, SIGNED, Limitation, RandArg, chlo_leak, define

FAMILY = "elementwise_binary"
SHAPE = (3, 4)


def _int_div(a, b):
    q = np.trunc(a.astype(np.float64) / b.astype(np.float64))
    return q.astype(a.dtype)


def _int_rem(a, b):
    return (a - _int_div(a, b) * b).astype(a.dtype)


OPS = {
    "add": (lax.add, np.add, NUMERIC, ("normal", "normal")),
    "sub": (lax.sub, np.subtract, NUMERIC, ("normal", "normal")),
    "mul": (lax.mul, np.multiply, NUMERIC, ("normal", "normal")),
    "div": (lax.div, None, NUMERIC, ("normal", "nonzero")),
    "rem": (lax.rem, None, SIGNED + FLOAT, ("normal", "nonzero")),
    "max": (lax.max, np.maximum, INTEGER + FLOAT, ("normal", "normal")),
    "min": (lax.min, np.minimum, INTEGER + FLOAT, ("normal", "normal")),
    "pow": (lax.pow, np.power, INEXACT, ("positive", "normal")),
    "atan2": (lax.atan2, np.arctan2, FLOAT, ("normal", "normal")),
    "nextafter": (lax.nextafter, np.nextafter, ("float32", "float64"), ("normal", "normal")),
    "complex": (lax.complex, lambda a, b: a + 1j * b, ("float32", "float64"), ("normal", "normal")),
}


def _div_ref(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return _int_div(a, b)
    return a / b


def _rem_ref(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return _int_rem(a, b)
    return np.fmod(a, b)


REFS = {"div": _div_ref, "rem": _rem_ref}
LOW = [Limitation("bf16/f16 rounding in transcendental ops", dtypes=("bfloat16", "float16"),
                  stage="compare", tol=(5e-2, 5e-2))]

def _nextafter_in(dt):
    """nextafter is defined per dtype: the reference must step in the input's own dtype."""
    return lambda a, b: np.nextafter(a.astype(dt), b.astype(dt))


for prim, (fn, ref, dtypes, domains) in OPS.items():
    for dt in dtypes:
        if prim == "nextafter":
            ref = _nextafter_in(dt)
        define(FAMILY, prim, fn, [RandArg(SHAPE, dt, domains[0]), RandArg(SHAPE, dt, domains[1])],
               dtype=dt, reference=ref or REFS[prim],
               compare="exact" if prim == "nextafter" else None,
               limitations=(LOW if dt in ("bfloat16", "float16") else [])
               + ([chlo_leak("next_after")] if prim == "nextafter" else []))
