"""Outputs held against expected outputs under a tolerance: the status of every comparison
of two output lists (compare, crossexec against the native run, the round trip, xhost's
three ways, a stored artifact's outputs).

``errors_with_mask``: the error metrics of one output and the mask of its elements that
disagree (``farm.judge.kernel``, under ``rtol`` and ``atol``, or exactly); the output's dtype
and shape must match what tracing promised (catches a lowering that drops or changes a dtype).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.judge.kernel import EXACT, Allowed, disagree
from farm.stages.compare import Compared, disagreement
from farm.stages.record import failure


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
    """(max abs / rel / ULP error and the mismatch count, the mask of the elements that
    disagree): integers, bools and an ``exact`` comparison equal or not, the rest within
    ``atol + rtol * |expected|`` (``farm.judge.kernel``)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.size == 0:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp_err": 0.0, "mismatches": 0.0}, np.zeros(a.shape, bool)
    kind = a.dtype.kind
    bad = disagree(a, e, EXACT if exact else Allowed(rtol, atol))
    if exact or kind in "biu":
        if kind in "biu":
            diff = np.abs(a.astype(np.float64) - e.astype(a.dtype, copy=False).astype(np.float64))
        else:
            diff = np.abs(a.astype(np.complex128 if kind == "c" else np.float64) - e)
        diff = np.where(np.isnan(diff), np.inf, diff)
        return {"max_abs_err": float(diff.max()), "max_rel_err": float(0.0 if not bad.any() else np.inf),
                "max_ulp_err": 0.0 if not bad.any() else float("inf"), "mismatches": float(bad.sum())}, bad
    wide = np.complex128 if kind == "c" or e.dtype.kind == "c" else np.float64
    a64 = a.astype(wide)
    e64 = e.astype(wide)
    same = (np.isnan(a64) & np.isnan(e64)) | (np.isinf(a64) & (a64 == e64))
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - e64)
    diff = np.where(same, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = np.abs(e64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.where(scale == 0, np.inf, scale))
        rel = np.where((scale == 0) & (diff > 0), np.inf, rel)
        ulp = diff / _ulp(np.where(np.isfinite(e64.real if kind == "c" else e64), np.abs(e64), 1.0), a.dtype)
    return {"max_abs_err": float(diff.max()), "max_rel_err": float(np.nanmax(rel)),
            "max_ulp_err": float(np.nanmax(ulp)), "mismatches": float(bad.sum())}, bad


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
        m, bad = errors_with_mask(a, np.asarray(e), rtol, atol, exact)
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


def compared(actual: list[np.ndarray] | None, expected: list[np.ndarray] | None, *, platform: str, against: str,
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
