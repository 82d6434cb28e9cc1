"""Special values as harness inputs: NaN, ±Inf, −0.0, subnormals, the extremes of each
dtype, and the integers where arithmetic wraps.

The random inputs of the other harnesses almost never hit these, and they are where
lowering rules differ: NaN propagation through max/min and reductions, the sign of a
zero, overflow to Inf, float→int conversion of NaN and out-of-range values, integer
division by zero and ``MIN / -1``, shifts by the bit width or more. Harnesses built from
these have no hand-written reference: the float64 jaxpr reference judges them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from farm.catalog.args import CustomArg
from farm.catalog.dtypes import INTEGER, np_dtype


def values(dtype: str) -> np.ndarray:
    """The special values of ``dtype``, one of each, as a 1-D array of that dtype."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return np.array([False, True])
    if dtype in INTEGER:
        info = np.iinfo(dt)
        cands = [info.min, info.min + 1, -2, -1, 0, 1, 2, 7, info.max // 2, info.max - 1, info.max]
        return np.array(sorted({int(c) for c in cands if info.min <= int(c) <= info.max}), dtype=dt)
    fi = ml_dtypes.finfo(dt)
    tiny, big = float(fi.tiny), float(fi.max)
    sub = float(fi.smallest_subnormal)
    cands = [np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, big, -big, 1.0, -1.0, 0.5, -2.5, 3.0,
             float(fi.eps), 1.0 + float(fi.eps), 100.0]
    return np.array(cands, dtype=np.float64).astype(dt)


def arg(dtype: str) -> CustomArg:
    """Every special value of ``dtype`` once (shape ``(n,)``)."""
    v = values(dtype)
    return CustomArg(f"special:{dtype}", lambda rng: v.copy(), v.shape, dtype)


def pair_args(x_dtype: str, y_dtype: str | None = None) -> tuple[CustomArg, CustomArg]:
    """Two arguments holding every pair of special values (their outer product, flattened)."""
    a, b = values(x_dtype), values(y_dtype or x_dtype)
    xs, ys = np.repeat(a, b.size), np.tile(b, a.size)
    name = f"special_pairs:{x_dtype}:{y_dtype or x_dtype}"
    return (CustomArg(name + ":x", lambda rng: xs.copy(), xs.shape, x_dtype),
            CustomArg(name + ":y", lambda rng: ys.copy(), ys.shape, y_dtype or x_dtype))


#: Where a function's derivative is tiny but representable, past the point its value rounds to
#: its limit (logistic(x) is 1.0 in float32 from x ≈ 17, tanh(x) from x ≈ 9): a derivative
#: computed from the rounded value (``ans * (1 - ans)``) is 0 there.
#: Random normal inputs never reach it.
SATURATING = {"float32": (5.0, 9.0, 12.0, 17.0, 20.0, 30.0)}


def saturating_arg(dtype: str) -> CustomArg:
    """Both signs of the dtype's saturating magnitudes (``SATURATING``), shape ``(2n,)``."""
    mags = np.array(SATURATING[dtype])
    v = np.concatenate([-mags[::-1], mags]).astype(np_dtype(dtype))
    return CustomArg(f"saturating:{dtype}", lambda rng: v.copy(), v.shape, dtype)


def ordinary(dtype: str, n: int) -> np.ndarray:
    """``n`` ordinary values of ``dtype`` (no special value among them): what the other
    operands hold while one holds the special values."""
    if dtype == "bool":
        return np.arange(n) % 2 == 0
    if dtype in INTEGER:
        return (np.arange(n) % 5 + 1).astype(np_dtype(dtype))
    return np.linspace(0.25, 2.5, n).astype(np_dtype(dtype))


def operand_sets(dtypes: list[str] | tuple[str, ...], extra: tuple[float, ...] = (),
                 others: Sequence[tuple[str, Callable[[int], np.ndarray]] | None] = (),
                 withheld: tuple[float, ...] = ()) -> list[tuple[str, tuple[CustomArg, ...]]]:
    """Edge-value operands for a function of ``len(dtypes)`` operands: (case, arguments) with
    each operand holding every special value of its dtype (plus ``extra``: the function's
    own domain edges, poles and branch points) while the others hold ordinary values
    (case ``"x0"``, ``"x1"``...), and, for two or more operands, all of them together (case
    ``"all"``: every pair for two operands, the same values in each for more). ``others``:
    per operand, (its name in the fingerprint, n -> n values) for what it holds while another
    is at its edges, where ``ordinary``'s generic values lie outside its domain (a probability).
    ``withheld``: special values left out of every operand (a value that makes the function
    hang, a finding: a hang is a timeout no limitation can expect); they name the arguments."""
    vals = [kept(_with(values(d), extra, d), withheld) for d in dtypes]
    if withheld:  # another set of values: other arguments, other harness keys
        extra = (*extra, "withheld", *withheld)
    out: list[tuple[str, tuple[CustomArg, ...]]] = []
    if len(dtypes) == 1:
        v = vals[0]
        return [("x0", (CustomArg(f"special:{dtypes[0]}:{extra}", lambda rng: v.copy(), v.shape, dtypes[0]),))]
    own = [others[j] if j < len(others) else None for j in range(len(dtypes))]
    for i, d in enumerate(dtypes):
        n = vals[i].size
        arrays = [vals[i] if j == i else (ordinary(dj, n) if own[j] is None else own[j][1](n))
                  for j, dj in enumerate(dtypes)]
        out.append((f"x{i}", tuple(CustomArg(f"special_alone:{i}:{dj}:{extra}" + (f":{own[j][0]}" if j != i and own[j]
                                                                                 else ""), lambda rng, a=a: a.copy(),
                                             a.shape, dj)
                                   for j, (dj, a) in enumerate(zip(dtypes, arrays)))))
    if len(dtypes) == 2:
        a, b = vals
        xs, ys = np.repeat(a, b.size), np.tile(b, a.size)
        out.append(("all", (CustomArg(f"special_pairs:{dtypes[0]}:{dtypes[1]}:{extra}:x", lambda rng: xs.copy(), xs.shape,
                                      dtypes[0]),
                            CustomArg(f"special_pairs:{dtypes[0]}:{dtypes[1]}:{extra}:y", lambda rng: ys.copy(), ys.shape,
                                      dtypes[1]))))
    else:
        n = min(v.size for v in vals)
        out.append(("all", tuple(CustomArg(f"special_all:{d}:{extra}", lambda rng, a=v[:n]: a.copy(), (n,), d)
                                 for d, v in zip(dtypes, vals))))
    return out


def kept(v: np.ndarray, withheld: tuple[float, ...]) -> np.ndarray:
    """The values but those ``withheld``: integers compared exactly in their dtype, floats
    by value (NaN by ``isnan``: it never equals itself)."""
    if not withheld or v.dtype == bool:
        return v
    if v.dtype.kind in "iu":
        info = np.iinfo(v.dtype)
        w = [int(x) for x in withheld if float(x).is_integer() and info.min <= x <= info.max]
        return v[~np.isin(v, np.array(w, dtype=v.dtype))]
    x, w = v.astype(np.float64), np.asarray(withheld, dtype=np.float64)
    drop = np.isin(x, w[~np.isnan(w)]) | (np.isnan(x) & bool(np.isnan(w).any()))
    return v[~drop]


def _with(v: np.ndarray, extra: tuple[float, ...], dtype: str) -> np.ndarray:
    """The special values with a function's own edges appended (those the dtype holds)."""
    if not extra or dtype == "bool":
        return v
    dt = np_dtype(dtype)
    if dtype in INTEGER:
        info = np.iinfo(dt)
        add = [int(e) for e in extra if float(e).is_integer() and info.min <= e <= info.max]
    else:
        add = list(extra)
    return np.concatenate([v, np.array(add, dtype=np.float64).astype(dt)]) if add else v
