"""A stored artifact's replayed outputs against the outputs stored with it (``farm replay``,
the version matrix): exact first; a changed signature fails; then within the catalog's
tolerance (``farm.judge.tolerance.of_stored``); then, for a decomposition, by the
operand both output sets describe, held to the one invariant bound.
"""
from __future__ import annotations

import numpy as np

from farm.judge.outputs import compared
from farm.judge.tolerance import Computation, allowed
from farm.reference.decompositions import DECOMPOSITIONS, distance, size
from farm.stages.compare import Compared


#: How a stored artifact's outputs were judged (``facts["judged"]`` of its compare record).
JUDGED = ("exact", "tolerance", "invariant", "none")
#: What a stored artifact's replayed outputs are compared with (``facts["against"]``).
STORED = "stored"


def replayed(actual: list[np.ndarray], expected: list[np.ndarray], *, primitive: str, platform: str,
           tol: tuple[float, float]) -> Compared:
    """A replayed artifact's outputs against the outputs stored with it: exact first; a
    changed signature fails; then within ``tol``; then, for a decomposition, by the operand
    both output sets describe, held to the one invariant bound."""
    promised = [{"dtype": str(np.asarray(e).dtype), "shape": list(np.shape(e))} for e in expected]
    exact = compared(actual, expected, platform=platform, against=STORED, rtol=0.0, atol=0.0, exact=True,
                     promised=promised)
    if exact.status != "fail":
        return _judged(exact, "exact", None)
    if len(actual) != len(expected) or [(np.shape(a), np.asarray(a).dtype) for a in actual] != \
            [(np.shape(e), np.asarray(e).dtype) for e in expected]:
        return _judged(exact, "exact", "signature")
    close = compared(actual, expected, platform=platform, against=STORED, rtol=tol[0], atol=tol[1], exact=False)
    if close.status != "fail":
        return _judged(close, "tolerance", "within_tolerance" if close.status == "ok" else None)
    if primitive not in DECOMPOSITIONS:
        return _judged(close, "tolerance", "mismatch")
    err = distance(primitive, actual, expected)
    if err is None:
        return _judged(close, "tolerance", "non_unique_no_invariant")
    residual = Computation(np.asarray(expected[0]).dtype, "invariant", terms=size(expected), floor=tol)
    bound = float(allowed(residual).atol)
    metrics = {**close.metrics, "invariant_err": err, "invariant_bound": bound}
    if err <= bound:
        return _judged(close.with_status("ok", error=None, error_type=None, metrics=metrics), "invariant", "non_unique")
    return _judged(close.with_status("fail", metrics=metrics, error=f"{primitive}: invariant error {err:.3g} > "
                                                                      f"{bound:.3g} (outputs also differ: {close.error})"),
                   "invariant", "non_unique_mismatch")


def _judged(rec: Compared, judged: str, reason: str | None) -> Compared:
    return rec.with_status(rec.status, facts={**rec.facts, "judged": judged, "reason": reason})
