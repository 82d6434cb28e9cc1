"""The verdict on a harness run at its operands' edge values (``farm.stages.edges``): the outputs
against the harness's jaxpr evaluated in float64 (``farm.judge.jaxpr``, the same reference and
policy as every other compare: NaN matches NaN, an infinite reference is matched exactly, zeros'
signs where the primitive defines them), under the harness's declared tolerance.

What has no independent answer at these values is ``skipped`` with the reason (a
non-unique result, a primitive without a reference rule); what JAX and XLA are known and
documented to do there is data (``farm.catalog.known``'s edge behaviours, the harness's own
``Limitation``s of stage ``edge_values``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.judge.tolerance import declared
from farm.results import Record
from farm.stages.record import failure


#: Primitives whose result at non-finite or overflowing operands has no unique answer: a sum
#: over ±inf and values near the largest finite one is inf, -inf or NaN by the order XLA adds in
#: (a convolution's algorithm, a dot's blocking), a factorization of such a matrix is NaN or
#: another algorithm's, a sampler's transform of an infinite parameter is its own. A variant of
#: theirs that fails with such operands is ``skipped`` with this reason; one that passes is ok.
NO_UNIQUE_ANSWER = {
    "conv_general_dilated": "a convolution's sums over inf and overflowing products depend on its algorithm",
    "dot_general": "a dot's sums over inf and overflowing products depend on the order it adds in",
    "qr": "the factors of a matrix with inf, NaN or overflowing entries are NaN or the algorithm's own",
    "custom_linear_solve": "a solve with inf, NaN or overflowing entries is NaN or the algorithm's own",
    "triangular_solve": "a solve with inf, NaN or overflowing entries is NaN or the algorithm's own",
    "random_gamma": "a gamma sampler at an infinite or overflowing shape parameter gives its transform's own value",
}
#: Beyond this magnitude, products and sums may overflow (the square root of float32's largest value).
OVERFLOWING = 1.8e19


def _unanswerable(jaxpr: Any, args: list[Any]) -> str | None:
    """Why a failed variant has no unique answer (a ``NO_UNIQUE_ANSWER`` primitive fed
    non-finite or overflowing operands), or None."""
    from farm.judge.jaxpr import _eqns  # noqa: PLC0415  (the walk of a jaxpr and its sub-jaxprs)

    prims = {p for p in NO_UNIQUE_ANSWER if _eqns(jaxpr.jaxpr, frozenset({p}))}
    if not prims:
        return None

    def wild(a: Any) -> bool:
        x = np.asarray(a)
        if not x.size or not (x.dtype.kind in "fc" or x.dtype.name == "bfloat16"):
            return False
        with np.errstate(all="ignore"):
            m = np.abs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
            return bool(np.any(~np.isfinite(m) | (m > OVERFLOWING)))

    if not any(wild(a) for a in args):
        return None
    return "; ".join(NO_UNIQUE_ANSWER[p] for p in sorted(prims))


def edge_values(h: Harness, jaxpr: Any, rec: Record) -> Record:
    """``rec`` (one variant's run) judged: ok, fail (what differs, where), skipped (no answer)."""
    from farm.judge.jaxpr import judge_jaxpr  # noqa: PLC0415  (the reference's rules, only where needed)

    if rec.status != "ok" or not isinstance(rec.handle, tuple):
        return rec.with_status(rec.status, handle=None)
    args, outs = rec.handle
    t0 = time.perf_counter()
    try:
        v = judge_jaxpr(jaxpr, args, outs, floor=declared(h, "cpu"))
    except (np.linalg.LinAlgError, ValueError) as e:
        if not isinstance(e, np.linalg.LinAlgError) and "illegal value" not in str(e):
            raise
        # LAPACK refuses a matrix of NaN or inf (SciPy's "illegal value in argument 4 of internal eig
        # algorithm (geev)", NumPy's LinAlgError): no answer to hold JAX's (NaN) to
        return rec.with_status("skipped", handle=None, error=f"no independent reference: {type(e).__name__}: {e}",
                               facts={**rec.facts, "reason": "the float64 reference's LAPACK refuses these values"})
    except Exception as e:  # a broken rule is the farm's bug: say so, never a pass
        return failure(Record, "edge_values", rec.platform, e, time.perf_counter() - t0,
                       facts={**rec.facts, "against": "jaxpr"})
    facts = {**rec.facts, **v.facts, "against": {"reference": "jaxpr"}.get(v.against, v.against)}
    why = _unanswerable(jaxpr, args) if v.status == "fail" else None
    if why is not None:
        return rec.with_status("skipped", handle=None, error=f"no unique answer: {why} ({v.error or ''})"[:1000],
                               metrics={**rec.metrics, **v.metrics}, facts={**facts, "reason": why})
    return rec.with_status(v.status, handle=None, error=v.error, error_type="Mismatch" if v.status == "fail" else None,
                           metrics={**rec.metrics, **v.metrics}, facts=facts)


def with_finding(rec: Record, again: Record | None, finding: str, covered: int) -> Record:
    """A variant whose ``covered`` elements a known finding names (``farm.catalog.known``):
    failing with them and passing without them (``again``) is the finding, ``expected_fail``;
    still failing without them is news, ``fail`` with both errors; passing with them is ``ok``
    and says the finding was not seen there (its predicate is wider than where the bug shows on
    every dtype; the finding's standalone repro says when it is fixed)."""
    if rec.status == "ok" or again is None:
        return rec.with_status(rec.status, facts={**rec.facts, "finding_not_seen": finding, "covered": covered})
    if again.status == "ok":
        return rec.with_status("expected_fail", facts={**rec.facts, "limitation": finding, "covered": covered})
    return rec.with_status("fail", error=f"{rec.error}; without the {covered} elements of a known finding "
                           f"({finding[:80]}...) still: {again.error}"[:1000])
