"""compare: the record of outputs held against a reference, and the error metrics it carries.

``errors()`` is a pure function: max abs / rel / ULP error and the mismatch count under
a tolerance; ``disagreement()`` how differing elements differ. Integers and bools are
compared exactly. Whether that is a pass is the judge's (``farm.judge.outputs``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from farm.results import Record


@dataclass(frozen=True, slots=True)
class Compared(Record):
    """metrics: max_abs_err, max_rel_err, max_ulp_err, mismatches; facts: what against."""


def _ulp(ref: np.ndarray, dtype: np.dtype) -> np.ndarray:
    name = np.dtype(dtype).name
    if name == "bfloat16":
        return np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64) * 65536.0
    if np.dtype(dtype).kind == "c":
        dtype = np.float32 if np.dtype(dtype).itemsize == 8 else np.float64
    if np.dtype(dtype).kind != "f":
        return np.ones_like(ref, dtype=np.float64)
    return np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)


def errors(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
           exact: bool = False) -> dict[str, float]:
    """Error metrics of ``actual`` against ``expected`` (pure)."""
    return errors_with_mask(actual, expected, rtol, atol, exact)[0]


def errors_with_mask(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
            exact: bool = False) -> tuple[dict[str, float], np.ndarray]:
    """(error metrics, the mask of the elements that disagree)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.size == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp_err": 0.0, "mismatches": 0.0}, np.zeros(a.shape, bool)
    kind = a.dtype.kind
    if exact or kind in "biu":
        ai = a.astype(np.complex128 if kind == "c" else np.float64) if kind not in "biu" else a.astype(object)
        ei = e.astype(a.dtype, copy=False) if kind in "biu" else e
        if kind in "biu":
            bad = np.asarray(a != ei)
            diff = np.abs(a.astype(np.float64) - ei.astype(np.float64))
        else:
            bad = ~((a == e) | (np.isnan(ai) & np.isnan(e.astype(ai.dtype))))
            diff = np.abs(ai - e)
        diff = np.where(np.isnan(diff), np.inf, diff)
        return {"max_abs_err": float(diff.max()), "max_rel_err": float(0.0 if not bad.any() else np.inf),
                "max_ulp_err": 0.0 if not bad.any() else float("inf"), "mismatches": float(bad.sum())}, bad
    wide = np.complex128 if kind == "c" or e.dtype.kind == "c" else np.float64
    a64 = a.astype(wide)
    e64 = e.astype(wide)
    both_nan = np.isnan(a64) & np.isnan(e64)
    same_inf = np.isinf(a64) & (a64 == e64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - e64)
    diff = np.where(both_nan | same_inf, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = np.abs(e64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, np.inf, scale))
        rel = np.where((scale == 0) & (diff > 0), np.inf, rel)
        ulp = diff / _ulp(np.where(np.isfinite(e64.real if kind == "c" else e64), np.abs(e64), 1.0), a.dtype)
    # a NaN or an infinity matches only itself (an infinite scale would accept anything)
    unmatched = ~(np.isfinite(a64) & np.isfinite(e64)) & ~(both_nan | same_inf)
    bad = (diff > atol + rtol * scale) | unmatched
    return {"max_abs_err": float(diff.max()), "max_rel_err": float(np.nanmax(rel)),
            "max_ulp_err": float(np.nanmax(ulp)), "mismatches": float(bad.sum())}, bad


def disagreement(got: np.ndarray, ref: np.ndarray, bad: np.ndarray, dtype: Any) -> dict[str, int]:
    """How the elements in ``bad`` disagree, as counts: what a failure's class is made of
    (``farm.analysis.signatures``), cheap enough to keep with every failing comparison.

    ``elements``, ``bad``; and where nonzero: ``nan`` (NaN where the reference is not),
    ``finite`` (a number where the reference is NaN), ``inf`` (an infinity on one side
    only, or the other infinity), ``flushed`` (zero where the reference is subnormal),
    ``sign`` (the opposite sign, zeros included, finite on both sides), ``exact`` (1:
    integers or bools, compared exactly)."""
    dt = np.dtype(dtype)
    g, r, bad = np.asarray(got), np.asarray(ref), np.asarray(bad, dtype=bool)
    out = {"elements": int(g.size), "bad": int(bad.sum())}
    if dt.kind in "biu":
        return {**out, "exact": 1}
    if not out["bad"] or g.shape != r.shape or bad.shape != g.shape or dt.kind not in "fcV":
        return out
    wide = np.complex128 if dt.kind == "c" or r.dtype.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        g = g.astype(wide)
        r = r.astype(dt).astype(wide) if dt.kind != "V" else r.astype(wide)
        gn, rn, gi, ri = np.isnan(g), np.isnan(r), np.isinf(g), np.isinf(r)
        counts = {"nan": bad & gn & ~rn, "finite": bad & ~gn & rn, "inf": bad & ~gn & ~rn & (gi | ri)}
        if wide is np.float64:
            tiny = float(ml_dtypes.finfo(dt).tiny) if dt.kind != "c" else 0.0
            counts["flushed"] = bad & (g == 0) & (r != 0) & (np.abs(r) < tiny)
            counts["sign"] = bad & ~(gn | rn | gi | ri) & ~counts["flushed"] & (np.signbit(g) != np.signbit(r))
    return {**out, **{k: int(v.sum()) for k, v in counts.items() if v.any()}}
