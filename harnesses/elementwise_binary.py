"""Elementwise binary lax primitives (arithmetic, min/max, atan2, nextafter, complex)."""
import numpy as np
from jax import lax

from farm.catalog import FLOAT, INEXACT, INTEGER, NUMERIC, SIGNED, CustomArg, Limitation, RandArg, chlo_leak, define, special, ulps

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
               + ([chlo_leak("next_after")] if prim == "nextafter" else []))


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
        lims = [chlo_leak("next_after")] if prim == "nextafter" else [ATAN2_SUBNORMAL] if prim == "atan2" else []
        define(FAMILY, prim, fn, list(special.pair_args(dt)), dtype=dt, group="special_values", limitations=lims)
for prim, fn in SPECIAL_INT.items():
    for dt in ("int8", "int32", "int64", "uint8", "uint32"):
        define(FAMILY, prim, fn, list(special.pair_args(dt)), dtype=dt, group="special_values")

#: Found by farm fuzz (docs/findings.md): XLA's CPU float32 pow of a subnormal base takes
#: its log as ln 2^-150 at any length (pow(1e-45, -0.5) = 3.78e22; IEEE 2.67e22, flushed inf).
POW_SUBNORMAL = Limitation("XLA CPU float32 pow of a subnormal base uses ln 2^-150 for its log", platforms=("cpu",),
                           dtypes=("float32",), stage="compare", error="elements differ from the float64 reference")
_BASES = np.repeat(np.geomspace(1.4e-45, 1.1e-38, 16).astype(np.float32), 4)
_EXPONENTS = np.tile(np.array([-0.5, -0.0831, 0.25, 1.0], np.float32), 16)
define(FAMILY, "pow", lax.pow, [CustomArg("subnormal_bases:float32:64", lambda rng: _BASES.copy(), _BASES.shape, "float32"),
                                CustomArg("exponents:float32:64", lambda rng: _EXPONENTS.copy(), _EXPONENTS.shape,
                                          "float32")],
       dtype="float32", group="xla_cpu_findings", limitations=[POW_SUBNORMAL])

#: Found by farm fuzz (docs/findings.md): XLA's CPU algebraic simplifier turns x / broadcast(y)
#: into x * broadcast(1 / y), and in float16 the reciprocal of a subnormal y overflows to inf,
#: so a subnormal x over a subnormal y is ±inf: IEEE gives a finite quotient (6e-08 / 6e-08 = 1),
#: flushing both to zero gives NaN. The same division without the broadcast is right.
DIV_BROADCAST_RECIPROCAL = Limitation("XLA CPU float16 x / broadcast(y) is x * (1/y): a subnormal over a subnormal "
                                      "is inf", platforms=("cpu",), dtypes=("float16",), stage="compare",
                                      error="elements differ from the float64 reference")
_NUM = np.where(np.arange(16) % 2 == 0, 6e-08, -0.7485)[None, :].repeat(4, 0).astype(np.float16)
_DEN = np.array([[-1.526e-05], [6e-08], [2e-05], [1.0]], np.float16)
define(FAMILY, "div", lambda x, y: lax.div(x, lax.broadcast_in_dim(y, x.shape, (0, 1))),
       [CustomArg("numerators:float16:4x16", lambda rng: _NUM.copy(), _NUM.shape, "float16"),
        CustomArg("small_divisors:float16:4x1", lambda rng: _DEN.copy(), _DEN.shape, "float16")],
       dtype="float16", group="xla_cpu_findings", params={"divisor": "broadcast"},
       limitations=[DIV_BROADCAST_RECIPROCAL])
define(FAMILY, "div", lax.div, [CustomArg("numerators:float16:4x16", lambda rng: _NUM.copy(), _NUM.shape, "float16"),
                                CustomArg("small_divisors:float16:4x16", lambda rng: np.broadcast_to(_DEN, _NUM.shape).copy(),
                                          _NUM.shape, "float16")],
       dtype="float16", group="xla_cpu_findings", params={"divisor": "same_shape"})

#: The same rewrite in float32 with huge divisors: 1 / 1.7e38 is subnormal, flushed to zero, so
#: -3.4e38 / broadcast(1.7e38) is -0 (IEEE -2).
DIV_BROADCAST_RECIPROCAL_HUGE = Limitation("XLA CPU float32 x / broadcast(y) is x * (1/y): 1/y flushed to zero for "
                                           "|y| > 2^126", platforms=("cpu",), dtypes=("float32",), stage="compare",
                                           error="elements differ from the float64 reference")
_NUM32 = np.array([-3.4028235e38, -4.8611764e37, 1.0, 3.75], np.float32)[None, :].repeat(4, 0)
_DEN32 = np.array([[1.7014117e38], [-1e38], [2.0], [1.0]], np.float32)
define(FAMILY, "div", lambda x, y: lax.div(x, lax.broadcast_in_dim(y, x.shape, (0, 1))),
       [CustomArg("numerators:float32:4x4", lambda rng: _NUM32.copy(), _NUM32.shape, "float32"),
        CustomArg("huge_divisors:float32:4x1", lambda rng: _DEN32.copy(), _DEN32.shape, "float32")],
       dtype="float32", group="xla_cpu_findings", params={"divisor": "broadcast"},
       limitations=[DIV_BROADCAST_RECIPROCAL_HUGE])
