"""Outputs held against expected outputs under a tolerance: the status of every comparison
of two output lists (compare, crossexec against the native run, the round trip, xhost's
three ways, a stored artifact's outputs).

The metrics are ``farm.stages.compare``'s; the output's dtype and shape must match what
tracing promised (catches a lowering that drops or changes a dtype).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.stages.compare import Compared, disagreement, errors_with_mask
from farm.stages.record import failure


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
