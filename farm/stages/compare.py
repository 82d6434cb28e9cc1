"""compare: outputs against an independent reference, or against another run of them.

``errors()`` is a pure function: max abs / rel / ULP error and the mismatch count under
a tolerance. Integers and bools are compared exactly; the output's dtype and shape must
match what tracing promised (catches a lowering that drops or changes a dtype).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.size == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp_err": 0.0, "mismatches": 0.0}
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
                "max_ulp_err": 0.0 if not bad.any() else float("inf"), "mismatches": float(bad.sum())}
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
    bad = diff > atol + rtol * scale
    return {"max_abs_err": float(diff.max()), "max_rel_err": float(np.nanmax(rel)),
            "max_ulp_err": float(np.nanmax(ulp)), "mismatches": float(bad.sum())}


def compare_outputs(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float,
                    exact: bool, promised: list[dict[str, Any]] | None = None) -> tuple[str, str | None, dict[str, float]]:
    """(status, first error line, metrics) for two flat output lists (pure)."""
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
        m = errors(a, np.asarray(e), rtol, atol, exact)
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
        status, err, metrics = compare_outputs(actual, expected, rtol, atol, exact, promised)
        return Compared(stage, platform, status, error=err, error_type="Mismatch" if err else None,
                        metrics=metrics, facts={"against": against, "rtol": rtol, "atol": atol, "exact": exact})
    except Exception as e:
        return failure(Compared, stage, platform, e, 0.0, facts={"against": against})
