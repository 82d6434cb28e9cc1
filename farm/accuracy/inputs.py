"""The inputs an accuracy table is measured on.

- bfloat16 and float16, unary: every one of the 65,536 bit patterns (NaNs and infinities
  included), so the 16-bit tables are exhaustive.
- float32 and float64, unary: ``n`` inputs stratified over the binades (every exponent
  field, both signs, the subnormals as one binade, the same count each, random
  significands), plus the special classes: ±0, the extreme subnormals, ±tiny, ±max, ±Inf,
  NaN, the integers and halves up to 64, and the floats next to each function's hard
  points (poles, zeros, branch points, overflow thresholds: ``Function.points``).
- Binary functions, every dtype: ``n`` pairs, each argument stratified over the binades,
  a quarter of them with a moderate second argument (|y| <= 32, where pow neither
  overflows nor underflows), plus every pair of the core special values (±0, the extreme
  subnormals, ±tiny, ±max, ±Inf, NaN, ±1, ±2, ±0.5, ±3, ±1.5) and the floats next to the
  function's points.

Deterministic for a given (dtype, n, seed): the reference cache keys on the inputs' bytes.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from farm.accuracy.functions import Function

SIXTEEN = ("bfloat16", "float16")
FLOATS = ("bfloat16", "float16", "float32", "float64")


def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _layout(dt: np.dtype) -> tuple[int, int, type]:
    """(exponent bits, significand bits, unsigned int type) of a float dtype."""
    fi = ml_dtypes.finfo(dt)
    return int(fi.nexp), int(fi.nmant), {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]


def exhaustive(dtype: str) -> np.ndarray:
    """Every bit pattern of a 16-bit float type."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np_dtype(dtype))


def stratified(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` floats, the same count from each binade of each sign (the subnormals as one)."""
    dt = np_dtype(dtype)
    nexp, nmant, ut = _layout(dt)
    fields = np.arange((1 << nexp) - 1, dtype=np.uint64)  # all but the Inf/NaN field
    strata = len(fields) * 2
    per = max(1, n // strata)
    exp = np.repeat(fields, per * 2)
    sign = np.tile(np.repeat(np.array([0, 1], dtype=np.uint64), per), len(fields))
    mant = rng.integers(0, 1 << nmant, size=exp.size, dtype=np.uint64)
    bits = (sign << np.uint64(nexp + nmant)) | (exp << np.uint64(nmant)) | mant
    return bits.astype(ut).view(dt)


def specials(dtype: str, points: tuple[float, ...] = (), core: bool = False, near: int = 4) -> np.ndarray:
    """The special classes, and the 2*``near``+1 floats around each of ``points`` and their
    negatives. ``core``: without the integers and halves (a binary function's grid)."""
    dt = np_dtype(dtype)
    fi = ml_dtypes.finfo(dt)
    _, nmant, _ = _layout(dt)
    tiny = float(fi.tiny)
    sub_min = tiny * 2.0 ** -nmant
    base = [0.0, sub_min, tiny - sub_min, tiny, float(fi.max), np.inf, 1.0, 2.0, 0.5]
    base += [3.0, 1.5] if core else [float(k) for k in range(1, 65)] + [k + 0.5 for k in range(0, 64)]
    vals = np.array(base, dtype=np.float64)
    vals = np.concatenate([vals, -vals, [np.nan]]).astype(dt)
    around = []
    for p in points:
        for q in (p, -p):
            with np.errstate(over="ignore"):  # a point beyond the dtype's range
                c = np.array(q, dtype=np.float64).astype(dt)
            if not np.isfinite(c.astype(np.float64)):
                continue
            up, down = c, c
            around.append(c)
            for _ in range(near):
                up = np.nextafter(up, np.array(np.inf, dtype=dt)).astype(dt)
                down = np.nextafter(down, np.array(-np.inf, dtype=dt)).astype(dt)
                around += [up, down]
    return np.concatenate([vals, np.array(around, dtype=dt)]) if around else vals


def unary(fn: Function, dtype: str, n: int, seed: int = 0) -> np.ndarray:
    if dtype in SIXTEEN:
        return exhaustive(dtype)
    rng = np.random.default_rng([seed, FLOATS.index(dtype)])
    return np.concatenate([specials(dtype, fn.points), stratified(dtype, n, rng)])


def binary(fn: Function, dtype: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    dt = np_dtype(dtype)
    rng = np.random.default_rng([seed, FLOATS.index(dtype), 2])
    x = stratified(dtype, n, rng)
    y = stratified(dtype, n, rng)
    rng.shuffle(y)
    q = x.size // 4
    y[:q] = rng.uniform(-32, 32, size=q).astype(dt)
    s = specials(dtype, fn.points, core=True, near=1)
    gx, gy = np.meshgrid(s, s)
    return np.concatenate([gx.ravel(), x]).astype(dt), np.concatenate([gy.ravel(), y]).astype(dt)


def for_function(fn: Function, dtype: str, n: int, seed: int = 0) -> list[np.ndarray]:
    """The inputs (one array per argument) of ``fn`` in ``dtype``."""
    return [unary(fn, dtype, n, seed)] if fn.arity == 1 else list(binary(fn, dtype, n, seed))
