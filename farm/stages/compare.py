"""compare: outputs against an independent reference, or against another run of them.

``errors()`` is a pure function: max abs / rel / ULP error and the mismatch count under
a tolerance. Integers and bools are compared exactly; the output's dtype and shape must
match what tracing promised (catches a lowering that drops or changes a dtype).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from farm.stages.record import failure

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
    return _errors(actual, expected, rtol, atol, exact)[0]


def _errors(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
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


def compare_outputs(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float,
                    exact: bool, promised: list[dict[str, Any]] | None = None,
                    counts: dict[str, int] | None = None) -> tuple[str, str | None, dict[str, float]]:
    """(status, first error line, metrics) for two flat output lists (pure). ``counts``,
    if given, is filled with the ``disagreement`` of the outputs that differ, summed."""
    if len(actual) != len(expected):
        return "fail", f"{len(actual)} outputs, expected {len(expected)}", {}
    total: dict[str, float] = {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp_err": 0.0, "mismatches": 0.0}
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        if promised is not None and i < len(promised):
            want = promised[i]
            if str(a.dtype) != want["dtype"] or list(a.shape) != list(want["shape"]):
                return "fail", (f"output {i} is {a.dtype}{list(a.shape)}, tracing promised "
                                f"{want['dtype']}{want['shape']}"), total
        if np.shape(e) != a.shape:
            try:
                e = np.broadcast_to(e, a.shape)
            except ValueError:
                return "fail", f"output {i} shape {a.shape} != expected {np.shape(e)}", total
        m, bad = _errors(a, np.asarray(e), rtol, atol, exact)
        if counts is not None:
            how = disagreement(a, np.asarray(e), bad, a.dtype) if m["mismatches"] else {"elements": a.size}
            for k, v in how.items():
                counts[k] = counts.get(k, 0) + int(v)
        for k, v in m.items():
            total[k] = total[k] + v if k == "mismatches" else max(total[k], v)
    if total["mismatches"]:
        return ("fail", f"{int(total['mismatches'])} elements differ; max abs err {total['max_abs_err']:.3g}, "
                        f"max rel err {total['max_rel_err']:.3g} (rtol={rtol:g}, atol={atol:g})", total)
    return "ok", None, total


def run(actual: list[np.ndarray] | None, expected: list[np.ndarray] | None, *, platform: str, against: str,
        rtol: float, atol: float, exact: bool, promised: list[dict[str, Any]] | None = None,
        stage: str = "compare") -> Compared:
    if actual is None:
        return Compared(stage, platform, "skipped", error="nothing executed", facts={"against": against})
    if expected is None:
        return Compared(stage, platform, "skipped", error=f"no {against} for this harness",
                        facts={"against": against})
    try:
        counts: dict[str, int] = {}
        status, err, metrics = compare_outputs(actual, expected, rtol, atol, exact, promised, counts)
        facts = {"against": against, "rtol": rtol, "atol": atol, "exact": exact}
        return Compared(stage, platform, status, error=err, error_type="Mismatch" if err else None,
                        metrics=metrics, facts={**facts, "disagreement": counts} if counts.get("bad") else facts)
    except Exception as e:
        return failure(Compared, stage, platform, e, 0.0, facts={"against": against})
