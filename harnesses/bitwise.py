"""Bitwise primitives: and/or/xor/not on bool and integers, and the three shifts.

Shift amounts cover the whole range, including amounts >= the bit width, where lax
defines the result (0, or the sign fill for an arithmetic right shift).
"""
import numpy as np
from jax import lax

from farm.catalog import INTEGER, CustomArg, RandArg, define, np_dtype

FAMILY = "bitwise"
SHAPE = (3, 4)
LOGICAL = ("bool",) + INTEGER

BINARY = {
    "and": (lax.bitwise_and, np.bitwise_and),
    "or": (lax.bitwise_or, np.bitwise_or),
    "xor": (lax.bitwise_xor, np.bitwise_xor),
}


def _bits(dt: str) -> int:
    return np_dtype(dt).itemsize * 8


def _as_unsigned(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"uint{x.dtype.itemsize * 8}"))


def _as_signed(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"int{x.dtype.itemsize * 8}"))


def _shift_left(x, s):
    bits = x.dtype.itemsize * 8
    u = _as_unsigned(x)
    out = np.where(s.astype(np.int64) >= bits, 0, u << np.minimum(s, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(x.dtype)


def _shift_right_logical(x, s):
    bits = x.dtype.itemsize * 8
    u = _as_unsigned(x)
    out = np.where(s.astype(np.int64) >= bits, 0, u >> np.minimum(s, bits - 1).astype(u.dtype))
    return out.astype(u.dtype).view(x.dtype)


def _shift_right_arithmetic(x, s):
    bits = x.dtype.itemsize * 8
    i = _as_signed(x)
    out = i >> np.minimum(s.astype(np.int64), bits - 1).astype(i.dtype)  # >= width: sign fill
    return out.astype(i.dtype).view(x.dtype)


SHIFTS = {
    "shift_left": (lax.shift_left, _shift_left),
    "shift_right_logical": (lax.shift_right_logical, _shift_right_logical),
    "shift_right_arithmetic": (lax.shift_right_arithmetic, _shift_right_arithmetic),
}


def _amounts(dt: str):
    """Shift amounts 0 .. bit width + 2 (so a few are out of range)."""
    bits = _bits(dt)
    return lambda rng: rng.integers(0, bits + 3, size=SHAPE).astype(np_dtype(dt))


for prim, (fn, ref) in BINARY.items():
    for dt in LOGICAL:
        define(FAMILY, prim, fn, [RandArg(SHAPE, dt, "bits"), RandArg(SHAPE, dt, "bits")], dtype=dt,
               reference=ref, compare="exact")

for dt in LOGICAL:
    define(FAMILY, "not", lax.bitwise_not, [RandArg(SHAPE, dt, "bits")], dtype=dt,
           reference=np.logical_not if dt == "bool" else np.invert, compare="exact")

for prim, (fn, ref) in SHIFTS.items():
    for dt in INTEGER:
        define(FAMILY, prim, fn, [RandArg(SHAPE, dt, "bits"), CustomArg("shift_amounts", _amounts(dt), SHAPE, dt)],
               dtype=dt, reference=ref, compare="exact")
