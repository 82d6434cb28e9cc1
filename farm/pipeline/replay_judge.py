"""How replayed outputs are judged against the outputs stored with the artifact.

The comparison is the compare stage's (``farm.stages.compare.run``), the tolerance the
catalog's (``Harness.tolerance``, else ``DEFAULT_TOL`` by the first output's dtype, as the
pipeline applies it), and limitations the pipeline's judge (``farm.pipeline.judge``).
What replay adds is the order it tries them in, recorded as ``facts["judged"]``: exact,
within tolerance, or, for outputs that are not unique (eigenvectors, Schur vectors,
signs), by an invariant: both output sets must describe the same operand.

Pure functions over arrays and records: no store, no jax.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from farm.catalog import DEFAULT_TOL, Harness
from farm.pipeline.judge import judge_record, judge_run
from farm.results import Record
from farm.stages import compare

#: Primitives whose outputs are not unique (any phase/sign per vector, any basis of a
#: degenerate eigenspace, any ordering of a Schur form): judged by an invariant.
NON_UNIQUE = ("eig", "eigh", "schur", "svd", "qr")
#: How the outputs were judged (``facts["judged"]`` of the compare record).
JUDGED = ("exact", "tolerance", "invariant", "none")
#: What replayed outputs are compared with (``facts["against"]``).
AGAINST = "stored"


def tolerance(expected: Sequence[Any], harness: Harness | None = None, platform: str = "cpu",
              dtype: str | None = None) -> tuple[float, float]:
    """(rtol, atol) by the catalog's policy for the first output's dtype (else ``dtype``):
    the harness's own (a looser ``Limitation.tol`` first) if it is in the catalog, else
    ``DEFAULT_TOL``."""
    first = str(np.asarray(expected[0]).dtype) if len(expected) else dtype
    if harness is not None:
        return harness.tolerance(platform, first)
    return DEFAULT_TOL.get(first or "", (0.0, 0.0))


def compare_replayed(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], *, primitive: str,
                     platform: str, tol: tuple[float, float]) -> compare.Compared:
    """The compare record of replayed outputs: exact first; a changed signature fails; then
    within ``tol``; then, for a primitive in ``NON_UNIQUE``, by the invariant."""
    actual, expected = list(actual), list(expected)
    promised = [{"dtype": str(np.asarray(e).dtype), "shape": list(np.shape(e))} for e in expected]
    exact = compare.run(actual, expected, platform=platform, against=AGAINST, rtol=0.0, atol=0.0, exact=True,
                        promised=promised)
    if exact.status != "fail":
        return _judged(exact, "exact", None)
    if not _same_signature(actual, expected):
        return _judged(exact, "exact", "signature")
    rtol, atol = tol
    close = compare.run(actual, expected, platform=platform, against=AGAINST, rtol=rtol, atol=atol, exact=False)
    if close.status != "fail":
        return _judged(close, "tolerance", "within_tolerance" if close.status == "ok" else None)
    if primitive not in NON_UNIQUE:
        return _judged(close, "tolerance", "mismatch")
    inv = invariant_error(primitive, actual, expected)
    if inv is None:
        return _judged(close, "tolerance", "non_unique_no_invariant")
    bound = 100 * max(rtol, np.finfo(np.float32).eps if rtol >= 1e-6 else np.finfo(np.float64).eps)
    metrics = {**close.metrics, "invariant_err": inv}
    if inv <= bound:
        return _judged(close.with_status("ok", error=None, error_type=None, metrics=metrics), "invariant", "non_unique")
    return _judged(close.with_status("fail", metrics=metrics,
                                     error=f"{primitive}: invariant error {inv:.3g} > {bound:.3g} "
                                           f"(outputs also differ: {close.error})"),
                   "invariant", "non_unique_mismatch")


def _judged(rec: compare.Compared, judged: str, reason: str | None) -> compare.Compared:
    return rec.with_status(rec.status, facts={**rec.facts, "judged": judged, "reason": reason})


def _same_signature(actual: list[np.ndarray], expected: list[np.ndarray]) -> bool:
    return len(actual) == len(expected) and all(
        np.shape(a) == np.shape(e) and np.asarray(a).dtype == np.asarray(e).dtype for a, e in zip(actual, expected))


def judge(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], primitive: str,
          tol: tuple[float, float] | None = None) -> tuple[str, str, str | None, str | None, dict[str, float]]:
    """(status, judged, reason, error, metrics) of replayed outputs against stored ones,
    with the catalog's default tolerance unless ``tol`` is given."""
    rec = compare_replayed(actual, expected, primitive=primitive, platform="cpu",
                           tol=tol if tol is not None else tolerance(expected))
    return rec.status, rec.facts["judged"], rec.facts["reason"], rec.error, dict(rec.metrics)


def judge_limitations(h: Harness, records: Sequence[Record]) -> list[Record]:
    """The pipeline's limitation judging for a replayed catalog harness.

    Every record but compare: a compare limitation speaks of the float64 reference, and
    replay compares with the outputs stored with the artifact, so a replay that matches
    them says nothing about whether that limitation still holds."""
    judged = judge_run(h, [judge_record(h, r) for r in records if r.stage != "compare"])
    it = iter(judged)
    return [r if r.stage == "compare" else next(it) for r in records]


def reconstruct(primitive: str, outs: Sequence[np.ndarray]) -> np.ndarray | None:
    """The operand a decomposition's outputs describe, or None when the layout is unknown.

    Layouts are those of ``lax.linalg``: eigh (v, w), eig (w, vl, vr), schur (t, q),
    svd (u, s, vh) in any order of the 1-D output, qr (q, r)."""
    o = [np.asarray(x).astype(np.complex128) for x in outs]
    try:
        if primitive == "eigh" and len(o) == 2 and o[1].ndim == o[0].ndim - 1:
            v, w = o
            return (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
        if primitive == "eig" and len(o) >= 2 and o[0].ndim == o[-1].ndim - 1:
            w, vr = o[0], o[-1]
            return (vr * w[..., None, :]) @ np.linalg.inv(vr)
        if primitive == "schur" and len(o) == 2 and o[0].ndim == 2 and o[1].ndim == 2:
            t, q = o
            return q @ t @ np.conj(q.T)
        if primitive == "svd" and len(o) == 3:
            one = [i for i, x in enumerate(o) if x.ndim == o[0].ndim - 1 or x.ndim == 1]
            if len(one) != 1:
                return None
            s = o[one[0]]
            u, vh = [x for i, x in enumerate(o) if i != one[0]]
            k = s.shape[-1]
            return (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
        if primitive == "qr" and len(o) == 2:
            return o[0] @ o[1]
    except (np.linalg.LinAlgError, ValueError):
        return None
    return None


def invariant_error(primitive: str, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float | None:
    """Relative distance between the operands both output sets describe (plus, for
    eigen-decompositions, between the sorted eigenvalues). None: no invariant known."""
    a, e = reconstruct(primitive, actual), reconstruct(primitive, expected)
    if a is None or e is None or a.shape != e.shape:
        return None
    scale = max(float(np.linalg.norm(e)), 1e-30)
    err = float(np.linalg.norm(a - e)) / scale
    values = {"eigh": 1, "eig": 0}.get(primitive)
    if values is not None:
        wa = np.sort_complex(np.asarray(actual[values]).astype(np.complex128).ravel())
        we = np.sort_complex(np.asarray(expected[values]).astype(np.complex128).ravel())
        err = max(err, float(np.linalg.norm(wa - we)) / max(float(np.linalg.norm(we)), 1e-30))
    return err


def coverage(seen: Iterable[str], replayed: Iterable[tuple[Sequence[str], str]]) -> dict[str, Any]:
    """Which custom-call targets seen in the catalog's cpu exports are exercised by at
    least one back-compat artifact that replayed ``ok`` here.

    ``replayed``: (custom_call_targets, status) per back-compat artifact."""
    seen = set(seen)
    covered: set[str] = set()
    tested: set[str] = set()
    for targets, status in replayed:
        tested |= set(targets)
        if status == "ok":
            covered |= set(targets)
    return {"seen": sorted(seen), "covered": sorted(seen & covered),
            "uncovered": sorted(seen - covered),
            "uncovered_but_tested": sorted((seen - covered) & tested)}
