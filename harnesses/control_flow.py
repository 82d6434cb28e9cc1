"""Control flow: cond, while_loop, scan, fori_loop (each traced into one structured
primitive: cond, while, scan) with closed-form NumPy references."""
import numpy as np
from jax import lax

from farm.catalog import CustomArg, RandArg, define

FAMILY = "control_flow"
SHAPE = (3, 4)
DTYPES = ("int8", "int32", "int64", "uint32", "bfloat16", "float16", "float32", "float64", "complex64")
TOL = {"bfloat16": (3e-2, 5e-2), "float16": (5e-3, 1e-2)}


def _pred(value: bool):
    return CustomArg(f"pred={value}", lambda rng: np.bool_(value), (), "bool")


def _cond(p, x):
    return lax.cond(p, lambda v: v * 2, lambda v: v - 1, x)


def _while(x):
    """Double x three times, counting in the loop carry."""
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (np.int32(0), x))[1]


def _scan(x):
    """Running sum over rows, and the final carry."""
    def body(carry, row):
        carry = carry + row
        return carry, carry
    return lax.scan(body, lax.full_like(x[0], 0), x)


def _fori(x):
    return lax.fori_loop(0, 4, lambda i, v: v + i.astype(v.dtype), x)


for dt in DTYPES:
    for value in (True, False):
        define(FAMILY, "cond", _cond, [_pred(value), RandArg(SHAPE, dt)], dtype=dt, params={"pred": value},
               reference=lambda p, x: x * 2 if p else x - 1, tol=TOL.get(dt))
    define(FAMILY, "while_loop", _while, [RandArg(SHAPE, dt)], dtype=dt, reference=lambda x: x * 8,
           tol=TOL.get(dt))
    define(FAMILY, "scan", _scan, [RandArg(SHAPE, dt)], dtype=dt,
           reference=lambda x: (x.sum(0, dtype=x.dtype), np.cumsum(x, 0, dtype=x.dtype)), tol=TOL.get(dt))
    define(FAMILY, "fori_loop", _fori, [RandArg(SHAPE, dt)], dtype=dt, reference=lambda x: x + 6,
           tol=TOL.get(dt))
