"""Elementwise binary lax primitives (arithmetic, min/max, atan2, nextafter, complex)."""
import numpy as np
from jax import lax

from farm.catalog import FLOAT, INEXACT, INTEGER, NUMERIC, SIGNED, Limitation, RandArg, chlo_leak, define, special, ulps

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

#: binary ops whose tolerance is the accuracy table's bound (docs/accuracy.md)
MEASURED = {"atan2", "rem"}


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
               tol=ulps.tolerance(prim, dt) if prim in MEASURED and dt in FLOAT else None,
               limitations=(LOW if dt in ("bfloat16", "float16") and not (prim in MEASURED and ulps.tolerance(prim, dt))
                            else [])
               + (chlo_leak("next_after") if prim == "nextafter" else []))


# ----------------------------------------------------------------- special values
# Every pair of special values (farm.catalog.special), judged by the float64 jaxpr
# reference: NaN and Inf arithmetic, signed zeros, integer wrap-around, division by zero
# and MIN / -1, shifts by the bit width or more.
SPECIAL_FLOAT = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "max": lax.max, "min": lax.min,
                 "pow": lax.pow, "atan2": lax.atan2, "rem": lax.rem, "nextafter": lax.nextafter}
SPECIAL_INT = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem, "max": lax.max,
               "shift_left": lax.shift_left, "shift_right_arithmetic": lax.shift_right_arithmetic,
               "shift_right_logical": lax.shift_right_logical}
#: Found by these harnesses: XLA's CPU atan2 with a subnormal argument is NaN (f32/bf16:
#: atan2(1e-45, 1e-45)) or in the wrong quadrant (f64: atan2(5e-324, -1) = -pi), neither
#: IEEE's answer nor that of flushing the subnormal to zero.
ATAN2_SUBNORMAL = Limitation("XLA CPU atan2 with subnormal arguments: NaN (f32/bf16) or the wrong quadrant (f64)",
                             platforms=("cpu",), dtypes=("bfloat16", "float32", "float64"), stage="compare",
                             error="elements differ from the float64 reference")
for prim, fn in SPECIAL_FLOAT.items():
    for dt in FLOAT:
        lims = chlo_leak("next_after") if prim == "nextafter" else [ATAN2_SUBNORMAL] if prim == "atan2" else []
        define(FAMILY, prim, fn, list(special.pair_args(dt)), dtype=dt, group="special_values", limitations=lims)
for prim, fn in SPECIAL_INT.items():
    for dt in ("int8", "int32", "int64", "uint8", "uint32"):
        define(FAMILY, prim, fn, list(special.pair_args(dt)), dtype=dt, group="special_values")
