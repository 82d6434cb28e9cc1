"""compare: the record of outputs held against a reference.

``disagreement()`` says how differing elements differ (pure). Which elements differ, the
error metrics and whether that is a pass are the judge's (``farm.judge.outputs``, on the
one comparison kernel ``farm.judge.kernel``).
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
